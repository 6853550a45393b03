// One hold: its card and its history.
import { h } from "./dom.js";

export async function hold(main, [id]) {
  main.append(h("h1", {}, "Hold"), h("p", {}, id));
}
