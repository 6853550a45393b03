// The signed-in page: who is signed in, and signing out. Text from the API goes in with
// textContent, never as markup.
import { logout, session } from "./api.js";

const who = document.getElementById("who");
const role = document.getElementById("role");
const signOut = document.getElementById("sign-out");
const problem = document.getElementById("problem");

function signIn() {
  location.assign("/signin");
}

function show(error) {
  problem.textContent = error.message;
  problem.hidden = false;
}

async function start() {
  try {
    const me = await session();
    who.textContent = me.name;
    // A credential limited to one world says so; the world's name is on the worlds' pages.
    role.textContent = me.world ? `(${me.role}, one world)` : `(${me.role})`;
    signOut.hidden = false;
  } catch (error) {
    if (error.status === 401) return signIn();
    show(error);
  }
}

signOut.addEventListener("click", async () => {
  signOut.disabled = true;
  try {
    await logout();
    signIn();
  } catch (error) {
    signOut.disabled = false;
    show(error);
  }
});

start();
