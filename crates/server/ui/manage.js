// Management for admins: worlds, agents, chats, grants, audit, tokens, webhooks, policy.
import { h } from "./dom.js";

export async function manage(main, [section]) {
  main.append(h("h1", {}, "Manage"), h("p", {}, section || ""));
}
