/** @jsxImportSource preact */
/// <reference lib="dom" />
/** Entry point of the bundle (`ui/build.ts` → `ui/dist/app.js`). */
import { render } from "preact";
import { App } from "./app.tsx";

render(<App />, document.getElementById("app")!);
