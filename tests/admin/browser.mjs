// Drives the control page in a real headless Chromium (playwright-core on the system's
// browser) for tests/admin.rs. One scenario per run: `node browser.mjs <scenario> <page URL>
// [argument]`. It prints `ready` when the page is up (the Rust side may then act), and exits
// 0 when what the scenario expects was seen, 1 with the reason otherwise.
import { createRequire } from "node:module";
import http from "node:http";

const require = createRequire(process.env.GANTRY_PLAYWRIGHT);
const { chromium } = require("playwright-core");

const [scenario, url, argument] = process.argv.slice(2);
const fail = (why) => { console.error(`browser: ${scenario}: ${why}`); process.exit(1); };

const browser = await chromium.launch({
  executablePath: process.env.GANTRY_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const timeout = 15000;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeout);
  const problems = [];
  page.on("pageerror", (e) => problems.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });

  if (scenario === "switch-off") {
    // argument: a permission. The switch is found by its accessible name and pressed with
    // the keyboard, as someone without a mouse would.
    await page.goto(url);
    const button = page.getByRole("button", { name: `Turn ${argument} off` });
    await button.focus();
    await Promise.all([page.waitForURL(/said=/), page.keyboard.press("Enter")]);
    const said = await page.locator("#said").textContent();
    if (!said.includes(`${argument} is now off`)) fail(`status says ${JSON.stringify(said)}`);
    const state = await page.locator(`tr[data-permission="${argument}"] td.state`).textContent();
    if (state.trim() !== "off") fail(`the row says ${JSON.stringify(state)}`);
  } else if (scenario === "audit-sees") {
    // argument: a tool. Waits for a refused call of it to appear in the live tail, after
    // filtering the tail to refusals.
    await page.goto(url + "#audit");
    await page.getByLabel("Decision").selectOption("deny");
    await page.waitForTimeout(300);
    console.log("ready");
    const row = page.locator("#audit-rows tr", { hasText: argument });
    await row.first().waitFor();
    const text = await row.first().textContent();
    if (!text.includes("deny")) fail(`the row says ${JSON.stringify(text)}`);
    // Its time in RFC 3339 (UTC), as `gantry audit` and the log write it.
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/.test(text)) fail(`the row's time is not RFC 3339: ${JSON.stringify(text)}`);
  } else if (scenario === "approve-sign-in") {
    // argument: the code a client's sign-in page shows. The user types it, as they read it,
    // into the approval form; no row offers an approval of its own.
    await page.goto(url + "#sign-ins");
    if (await page.locator("tr[data-pending]").count() < 1) fail("no waiting request is listed");
    if (await page.getByRole("button", { name: /^Approve sign-in/ }).count() !== 0) fail("a row offers its own approval");
    await page.getByLabel("Code your sign-in page shows").fill(argument.toLowerCase());
    await Promise.all([page.waitForURL(/said=/), page.getByRole("button", { name: "Approve", exact: true }).click()]);
    const said = await page.locator("#said").textContent();
    if (!said.includes("may now use core")) fail(`status says ${JSON.stringify(said)}`);
  } else if (scenario === "kill") {
    // argument: a session id.
    await page.goto(url + "#sessions");
    const button = page.getByRole("button", { name: `Kill session ${argument}` });
    await Promise.all([page.waitForURL(/said=/), button.click()]);
    const said = await page.locator("#said").textContent();
    if (!said.includes(`session ${argument} and its process tree were ended`)) fail(`status says ${JSON.stringify(said)}`);
    if (await page.locator(`tr[data-session="${argument}"]`).count() !== 0) fail("the session is still listed");
  } else if (scenario === "foreign-origin") {
    // argument: the form's CSRF token, as if a page elsewhere had learned it. A page served
    // from another origin posts the form; the control page must refuse it.
    const server = http.createServer((req, res) => {
      res.setHeader("content-type", "text/html");
      if (req.url === "/plain") return res.end("<p>another site</p>");
      res.end(`<form id=f method=post action="${url}permission"><input name=csrf value="${argument}"><input name=name value=read><input name=on value=false></form><script>document.getElementById("f").submit()</script>`);
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    // Another port of the same host: another origin, as a local web app would have.
    const foreign = `http://127.0.0.1:${server.address().port}/`;
    const response = page.waitForResponse((r) => r.url().endsWith("/permission"));
    await page.goto(foreign);
    const status = (await response).status();
    if (status !== 403) fail(`the control page answered ${status}`);
    // And a script of a page there cannot read the control page either.
    await page.goto(foreign + "plain");
    const read = await page.evaluate(async (u) => {
      try { const r = await fetch(u); return "read " + r.status; } catch (e) { return "blocked"; }
    }, url);
    server.close();
    if (read !== "blocked") fail(`a foreign page could ${read} the control page`);
    // The refusals show as console errors of the foreign page, as they should.
    problems.length = 0;
  } else {
    fail("unknown scenario");
  }
  if (problems.length) fail(`page errors: ${problems.join("; ")}`);
  console.log("ok");
} finally {
  await browser.close();
}
