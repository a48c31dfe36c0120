/** Entry point: read the server's boot data and build the page. */

import "./styles/base.css";
import "./styles/layout.css";
import { App } from "./app";
import { readBoot } from "./boot";

const root = document.getElementById("app") ?? document.body.appendChild(document.createElement("div"));
root.id = "app";
const app = new App(root, readBoot());
// For debugging from the console and for browser tests that need the live editor.
(window as unknown as { jaxplay: App }).jaxplay = app;
