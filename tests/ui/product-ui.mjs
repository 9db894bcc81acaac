#!/usr/bin/env node
// The product's own UI, unmodified, driven through a new user's journey on awp in headless
// Chromium (issue 38): onboarding from the first screen (awp's URL, anon key and service-role
// key), sign-in, the dashboard, the task board, contacts, collections, activity, notifications,
// knowledge, an agent provisioned from a product template, every settings page. For each step it
// keeps a screenshot, what the page says, the browser's failing requests (status, URL, body),
// the UI server's failing calls to awp (fetch-log.mjs, preloaded into it) and awp's access-log
// lines of status >= 400 in the step's time window. Not part of ctest or CI: the UI is not in
// this repository. README.md beside this file says how to run it.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const env = process.env;
const awpUrl = (env.AWP_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
const uiPort = Number(env.UI_PORT ?? 3100);
const uiUrl = env.UI_URL ?? `http://127.0.0.1:${uiPort}`;
const uiDir = env.UI_DIR; // the product's apps/ui, built (`.next/standalone`)
const serviceRoleKey = env.SERVICE_ROLE_KEY;
const out = path.resolve(env.OUT_DIR ?? 'product-ui-run');
const gatewayLog = env.AWP_LOG; // run-stack.sh's output, if kept in a file
const chromiumPath = env.CHROMIUM ?? '/usr/bin/chromium';
const email = env.UI_EMAIL ?? 'ada@example.com';
const password = env.UI_PASSWORD ?? 'correct-horse-battery-9';
if (!serviceRoleKey) throw new Error('SERVICE_ROLE_KEY is required (.awp/stack.env)');
if (!uiDir && !env.UI_URL) throw new Error('UI_DIR (the product\'s built apps/ui) or UI_URL is required');
fs.mkdirSync(path.join(out, 'shots'), { recursive: true });

const { workspace } = await (await fetch(`${awpUrl}/api/config`)).json();
const anonKey = workspace.anonKey;

// The UI's server, started from its standalone build with a fresh config folder, the server-side
// fetch logger preloaded; its output is kept in ui.log.
let uiProc = null;
const uiLog = path.join(out, 'ui.log');
if (!env.UI_URL) {
  const standalone = path.join(uiDir, '.next', 'standalone');
  for (const [from, to] of [['.next/static', '.next/standalone/.next/static'], ['public', '.next/standalone/public']]) {
    if (!fs.existsSync(path.join(uiDir, to))) fs.cpSync(path.join(uiDir, from), path.join(uiDir, to), { recursive: true });
  }
  const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'product-ui-config-'));
  const log = fs.openSync(uiLog, 'w');
  uiProc = spawn(process.execPath, ['--import', path.join(here, 'fetch-log.mjs'), 'server.js'], {
    cwd: standalone,
    env: { ...env, HQ_CONFIG_DIR: configDir, PORT: String(uiPort), HOSTNAME: '127.0.0.1', NEXT_TELEMETRY_DISABLED: '1', UIRUN_AWP_URL: awpUrl },
    stdio: ['ignore', log, log],
  });
  for (let i = 0; ; i++) {
    try { await fetch(uiUrl, { redirect: 'manual' }); break; } catch { if (i > 100) throw new Error('the UI did not start'); }
    await new Promise((r) => setTimeout(r, 200));
  }
}

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
page.setDefaultTimeout(20000);
let current = [];
page.on('response', async (r) => {
  if (r.status() < 400) return;
  let body = '';
  try { body = (await r.text()).slice(0, 400); } catch {}
  current.push({ status: r.status(), method: r.request().method(), url: r.url(), body });
});
page.on('requestfailed', (r) => {
  const error = r.failure()?.errorText ?? '';
  // Next.js aborts its own prefetches and server-action navigations: not failures.
  if (error !== 'net::ERR_ABORTED') current.push({ status: 'failed', method: r.method(), url: r.url(), body: error });
});
page.on('pageerror', (e) => current.push({ status: 'pageerror', body: e.message.slice(0, 300) }));

const uiFetchFailures = (since) => (fs.existsSync(uiLog) ? fs.readFileSync(uiLog, 'utf8') : '')
  .split('\n').filter((l) => l.includes('"uirun_fetch"')).map((l) => { try { return JSON.parse(l); } catch { return null; } })
  .filter((x) => x && x.t >= since);
const gatewayFailures = (since) => (gatewayLog && fs.existsSync(gatewayLog) ? fs.readFileSync(gatewayLog, 'utf8') : '')
  .split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => { try { return JSON.parse(l); } catch { return null; } })
  .filter((x) => x && x.status >= 400 && x.ts >= since);

const report = [];
let n = 0;
async function step(name, fn) {
  const since = new Date().toISOString();
  current = [];
  let error = null;
  try { await fn(); } catch (e) { error = e.message.split('\n')[0]; }
  await page.waitForTimeout(1000);
  const shot = path.join(out, 'shots', `${String(++n).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: shot });
  const text = (await page.locator('body').innerText().catch(() => '')).replace(/\s*\n+\s*/g, ' | ').slice(0, 600);
  const entry = { step: name, url: page.url(), ok: !error, error, shot, text, browser: current, ui_server: uiFetchFailures(since), awp: gatewayFailures(since) };
  // A step passes when it did what the user wanted and awp answered no request with >= 400.
  if (!error && entry.awp.length) {
    entry.ok = false;
    error = entry.error = `awp answered ${entry.awp.map((f) => `${f.status} ${f.method} ${f.path}`).join(', ')}`;
  }
  report.push(entry);
  const problems = entry.browser.length + entry.ui_server.length + entry.awp.length;
  console.log(`${error ? 'FAIL' : 'ok  '} ${name.padEnd(28)} ${page.url()}${problems ? `  (${problems} failing requests)` : ''}${error ? `\n     ${error}` : ''}`);
  return entry;
}
const go = (p) => page.goto(`${uiUrl}${p}`);
const minimize = () => page.getByText('Minimize', { exact: true }).click({ timeout: 1500 }).catch(() => {});
const until = async (what, pred, ms) => {
  for (const end = Date.now() + ms; Date.now() < end; await page.waitForTimeout(2000)) if (await pred()) return;
  throw new Error(`${what}: not within ${ms / 1000} s`);
};

// Onboarding, as a new user: the UI's OSS wizard (welcome, focus, setup, AI, agent, account).
await step('welcome', async () => {
  await go('/');
  await page.getByPlaceholder('Your full name').fill('Ada Lovelace');
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByText('What best describes your work?').waitFor();
});
await step('focus', async () => {
  await page.getByText('Sales & outreach').click();
  await page.locator('#sb-url').waitFor();
});
await step('database', async () => {
  await page.locator('#sb-url').fill(awpUrl);
  await page.locator('#sb-publishable').fill(anonKey);
  await page.locator('#sb-secret').fill(serviceRoleKey);
  await page.getByRole('button', { name: 'Connect database' }).click();
  await page.getByText('Connected to Supabase').waitFor();
});
await step('gateway', async () => {
  // "This machine" starts the product's gateway with docker compose; without docker the UI
  // still polls the gateways table, where awp's runner heartbeats.
  await page.getByText('This machine').click();
  await page.getByRole('button', { name: /Start gateway/ }).click();
  await page.getByText('Gateway connected').waitFor({ timeout: 30000 });
});
await step('provider', async () => {
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByText('Ollama', { exact: true }).click(); // local: no key to validate offline
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByText('Choose your first employee').waitFor();
});
await step('agent-provisioned', async () => {
  await page.getByRole('button', { name: /^Create / }).click(); // the suggested crm-researcher
  await page.getByText('Create your login').waitFor({ timeout: 150000 }); // advances once ready
});
await step('account', async () => {
  await page.getByPlaceholder('you@example.com').fill(email);
  await page.getByPlaceholder('At least 6 characters').fill(password);
  await page.getByRole('button', { name: /Finish setup/ }).click();
  await page.waitForURL(/\/(login|dashboard)/, { timeout: 30000 });
});
await step('sign-in', async () => {
  if (page.url().includes('/login')) {
    await page.locator('input[type=email]').fill(email);
    await page.locator('input[type=password]').fill(password);
    await page.getByRole('button', { name: /Sign in/ }).click();
  }
  await page.waitForURL(/\/dashboard/, { timeout: 30000 });
});
await step('dashboard', async () => {
  await go('/dashboard'); // a full load: the browser client built with the workspace's URL
  await page.getByText('YOUR TEAM').first().waitFor();
  await minimize();
});

// The task board: create, comment, move (status menu, then a drag on the board), assign.
const title = 'Draft the Q1 outreach list';
await step('tasks', async () => { await go('/dashboard/tasks'); await page.getByText('STREAMS').first().waitFor(); await minimize(); });
await step('task-created', async () => {
  await page.getByRole('button', { name: 'New task' }).first().click();
  await page.getByPlaceholder('What needs to be done?').fill(title);
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByText(`Created task '${title}'`).waitFor();
});
await step('task-comment', async () => {
  const box = page.getByPlaceholder(/Add a comment/);
  await box.click();
  await box.fill('First pass: start with the fintech list.');
  await page.keyboard.press('Control+Enter');
  await page.getByText('First pass: start with the fintech list.').last().waitFor();
});
await step('task-in-progress', async () => {
  await page.getByRole('dialog').getByText('To Do', { exact: true }).click();
  await page.getByRole('option', { name: /In Progress/i }).or(page.getByRole('menuitem', { name: /In Progress/i })).first().click();
  await page.getByText('Updated task fields: status').waitFor();
});
await step('task-assigned', async () => {
  await page.getByRole('dialog').getByText('Unassigned', { exact: true }).click();
  await page.getByRole('option', { name: /Scout/ }).or(page.getByRole('menuitem', { name: /Scout/ })).first().click();
  await page.getByText(/Updated task fields: assignee/).waitFor();
});
await step('task-board-reloaded', async () => {
  await go('/dashboard/tasks');
  await page.getByText(title).first().waitFor();
  const board = page.locator('button:has(svg.lucide-columns-3)');
  if (await board.count()) await board.first().click();
  await page.getByText('In Progress', { exact: true }).first().waitFor();
  await minimize();
});
await step('task-dragged-to-blocked', async () => {
  // The next column on the board (the last one, Done, is off screen at this width).
  const card = await page.getByText(title).first().boundingBox();
  const done = await page.getByText('Blocked', { exact: true }).last().boundingBox();
  await page.mouse.move(card.x + 20, card.y + 5);
  await page.mouse.down();
  for (let i = 1; i <= 15; i++) {
    await page.mouse.move(card.x + 20 + ((done.x - card.x) * i) / 15, card.y + 5 + ((done.y + 80 - card.y) * i) / 15);
    await page.waitForTimeout(50);
  }
  await page.mouse.up();
  await page.getByText(/was dropped over droppable area blocked/).waitFor();
});

// CRM, collections, knowledge.
await step('contacts', async () => { await go('/dashboard/contacts'); await page.getByRole('button', { name: 'New contact' }).waitFor(); await minimize(); });
await step('contact-created', async () => {
  await page.getByRole('button', { name: 'New contact' }).click();
  await page.getByPlaceholder('Who are you adding?').fill('Grace Hopper');
  await page.getByPlaceholder('email@example.com').fill('grace@example.com');
  await page.getByPlaceholder('Company name').fill('Navy Labs');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByText('Contact created').waitFor();
});
await step('organizations', async () => { await go('/dashboard/organizations'); await page.waitForTimeout(2500); });
await step('campaigns', async () => { await go('/dashboard/crm?tab=campaigns'); await page.getByText(/campaigns/).first().waitFor(); });
await step('collection-from-template', async () => {
  await page.getByText('Add Collection').click();
  await page.getByText('Content Calendar').click();
  await page.getByRole('dialog').getByRole('button', { name: 'Create', exact: true }).click();
  await page.locator('a[href="/dashboard/collections/content-calendar"]').first().waitFor();
});
await step('collection-record', async () => {
  await go('/dashboard/collections/content-calendar');
  await minimize();
  await page.getByRole('button', { name: 'New Record' }).first().click();
  await page.waitForURL(/content-calendar\/[0-9a-f-]{36}/);
});
await step('knowledge-page', async () => {
  await go('/dashboard/knowledge');
  await page.getByRole('button', { name: 'New' }).first().click();
  await page.getByRole('menuitem').first().click(); // Page
  await page.getByPlaceholder('Page title...').fill('Outreach playbook');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.waitForURL(/knowledge\/[0-9a-f-]{36}/);
});
await step('activity', async () => { await go('/dashboard/activity'); await page.getByText(`Created contact 'Grace Hopper'`).waitFor(); });
await step('notifications', async () => { await go('/dashboard/notifications'); await page.getByText(/assigned to task/).first().waitFor(); });
await step('routines', async () => { await go('/dashboard/routines'); await page.getByRole('button', { name: 'New routine' }).first().waitFor(); });
await step('routine-created', async () => {
  await minimize();
  await page.getByRole('button', { name: 'New routine' }).first().click();
  await page.getByPlaceholder('e.g. Daily inbox check').fill('Pipeline sweep');
  await page.getByText('Select agent...').click();
  await page.getByText('Scout').last().click();
  await page.getByPlaceholder(/Check inbox/).fill('Look over the pipeline.');
  // The form offers the browser's own zone, which is "UTC" in a headless Chromium, and then
  // refuses it ("Invalid timezone"): Intl.supportedValuesOf lists no "UTC" (the UI's own).
  const zone = page.locator('input[value="UTC"]');
  if (await zone.count()) await zone.fill('Europe/London');
  await page.getByRole('button', { name: 'Create routine' }).click();
  await page.getByText('Daily at 9 AM Europe/London').waitFor();
});
await step('routine-run-now', async () => {
  await page.getByText('Pipeline sweep').first().click();
  await page.getByRole('button', { name: 'Run now' }).click();
  await page.waitForTimeout(3000);
});

// An agent from a product template (template/analytics), to ready; its page.
await step('agent-template', async () => {
  await go('/dashboard/agents');
  await minimize();
  await page.getByRole('button', { name: 'New agent' }).click();
  await page.getByText('Analytics', { exact: true }).first().click();
  await page.getByRole('button', { name: 'Continue' }).click();
  const name = page.getByPlaceholder('What should we call them?');
  await name.click();
  await name.pressSequentially('Ana', { delay: 30 });
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.getByText('PROVISIONING').first().waitFor();
});
await step('agent-ready', async () => {
  await page.getByText('Ana is ready').waitFor({ timeout: 150000 });
});
await step('agent-page', async () => {
  await page.getByRole('button', { name: 'Open agent' }).click();
  await page.waitForURL(/agents\/ana/);
  await page.getByText('SKILLS').first().waitFor();
});
await step('agent-personality', async () => {
  await page.getByText('Personality', { exact: true }).first().click();
  await page.waitForTimeout(4000);
  if (await page.getByText(/Couldn't load/).count()) throw new Error(`the page says: ${await page.getByText(/Couldn't load/).first().innerText()}`);
});

// Every settings page.
for (const s of ['general', 'profile', 'modules', 'appearance', 'labels', 'templates', 'pipeline', 'fields', 'sources',
  'connections', 'secrets', 'budgets', 'plugins', 'backups', 'gateways', 'networking', 'database', 'logs', 'actions']) {
  await step(`settings-${s}`, async () => { await go(`/dashboard/settings/${s}`); await page.waitForTimeout(2500); });
}
await step('settings-restart-gateway', async () => {
  await page.getByRole('button', { name: /Restart Gateway/ }).click();
  await page.waitForTimeout(3000);
});

await browser.close();
if (uiProc) uiProc.kill('SIGTERM');
fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 2));
const failed = report.filter((e) => !e.ok);
console.log(`\n${report.length - failed.length}/${report.length} steps passed; report: ${path.join(out, 'report.json')}`);
for (const e of report) {
  for (const f of e.browser) console.log(`  ${e.step}: browser ${f.status} ${f.method ?? ''} ${f.url ?? ''} ${f.body}`);
  for (const f of e.ui_server) console.log(`  ${e.step}: ui server ${f.status} ${f.method} ${f.url} ${f.body}`);
  for (const f of e.awp) console.log(`  ${e.step}: awp ${f.status} ${f.method} ${f.path}`);
}
process.exit(failed.length ? 1 : 0);
