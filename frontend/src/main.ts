/** Entry point: read the server's boot data and build the page. */

import "./core/base.css";
import "./shell/layout.css";
import { App } from "./shell/app";
import { readBoot } from "./core/boot";
import { mountRoomPage } from "./rooms/room";
import { mountRoomEntry } from "./rooms/room_home";

const root = document.getElementById("app") ?? document.body.appendChild(document.createElement("div"));
root.id = "app";
const boot = readBoot();
const app = new App(root, boot);
const room = mountRoomPage(app, boot);
const topbar = root.querySelector<HTMLElement>("header.topbar");
// A shared link's page can start a room too (with the code in its editor).
if (!room && boot.mode === "editor" && topbar) mountRoomEntry(topbar, app.editor);
// For debugging from the console and for browser tests that need the live editor.
(window as unknown as { jaxplay: App }).jaxplay = app;
