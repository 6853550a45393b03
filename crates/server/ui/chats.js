// Worlds, a world's agents and chats, and a chat.
import { h } from "./dom.js";

export async function worlds(main) {
  main.append(h("h1", {}, "Worlds"));
}

export async function world(main, [name]) {
  main.append(h("h1", {}, name));
}

export async function chat(main, [worldName, id]) {
  main.append(h("h1", {}, `${worldName} / ${id}`));
}
