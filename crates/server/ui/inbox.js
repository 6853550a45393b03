// The inbox: every pending hold the caller may see.
import { h } from "./dom.js";

export async function inbox(main) {
  main.append(h("h1", {}, "Inbox"));
}
