// The hold card: one component for the inbox, the hold page and chats.
import { h } from "./dom.js";

export function card(hold) {
  return h("article", { class: "card hold", dataset: { hold: hold.id } }, hold.id);
}
