/**
 * The chat view's real page in headless Chromium (Debian's, driven by playwright-core), with
 * a stand-in for the VS Code webview API and VS Code's theme variables; the host side is the
 * real reducer and host→view bridge. For view tests that open their own page (at their own
 * width) — `webview.test.ts` keeps its own copy of the same set-up.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { type Browser, type Page, chromium } from 'playwright-core';

import type { ChatEvent } from '../src/core/chatState';
import { type ChatState, initialState, reduce } from '../src/core/chatState';
import { chatPageHtml, viewMessages } from '../src/core/webviewHtml';
import type { HostToView } from '../src/common/view';
import type { SessionUpdate } from '../src/client/protocol';

export const ROOT = path.resolve(__dirname, '..', '..');
export const OUTPUT = path.join(ROOT, 'test-output');
const ORIGIN = 'https://parley-webview.test';
export const CHROMIUM = process.env.PARLEY_CHROMIUM ?? '/usr/bin/chromium';
export const haveChromium = fs.existsSync(CHROMIUM);

/** VS Code's Dark Modern colours for the variables the page uses (VS Code injects these). */
export const DARK: Record<string, string> = {
  '--vscode-font-family': 'system-ui, "Ubuntu", "Droid Sans", sans-serif',
  '--vscode-font-size': '13px',
  '--vscode-editor-font-family': '"Droid Sans Mono", "monospace", monospace',
  '--vscode-editor-font-size': '12px',
  '--vscode-foreground': '#cccccc',
  '--vscode-descriptionForeground': '#9d9d9d',
  '--vscode-sideBar-background': '#181818',
  '--vscode-panel-border': '#2b2b2b',
  '--vscode-input-background': '#313131',
  '--vscode-input-foreground': '#cccccc',
  '--vscode-input-border': '#3c3c3c',
  '--vscode-button-background': '#0078d4',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-secondaryBackground': '#313131',
  '--vscode-button-secondaryForeground': '#cccccc',
  '--vscode-badge-background': '#616161',
  '--vscode-badge-foreground': '#f8f8f8',
  '--vscode-textLink-foreground': '#4daafc',
  '--vscode-textCodeBlock-background': '#2b2b2b',
  '--vscode-dropdown-background': '#313131',
  '--vscode-dropdown-border': '#3c3c3c',
  '--vscode-dropdown-foreground': '#cccccc',
  '--vscode-focusBorder': '#0078d4',
  '--vscode-errorForeground': '#f85149',
  '--vscode-inputValidation-errorBorder': '#be1100',
  '--vscode-inputValidation-errorBackground': '#5a1d1d',
  '--vscode-inputValidation-warningBorder': '#b89500',
  '--vscode-diffEditor-insertedLineBackground': 'rgba(155, 185, 85, 0.2)',
  '--vscode-diffEditor-removedLineBackground': 'rgba(255, 0, 0, 0.2)',
  '--vscode-gitDecoration-addedResourceForeground': '#81b88b',
  '--vscode-gitDecoration-deletedResourceForeground': '#c74e39',
};

/** VS Code's Light Modern colours for the same variables. */
export const LIGHT: Record<string, string> = {
  ...DARK,
  '--vscode-foreground': '#3b3b3b',
  '--vscode-descriptionForeground': '#3b3b3b',
  '--vscode-sideBar-background': '#f8f8f8',
  '--vscode-panel-border': '#e5e5e5',
  '--vscode-input-background': '#ffffff',
  '--vscode-input-foreground': '#3b3b3b',
  '--vscode-input-border': '#cecece',
  '--vscode-button-background': '#005fb8',
  '--vscode-button-secondaryBackground': '#e5e5e5',
  '--vscode-button-secondaryForeground': '#3b3b3b',
  '--vscode-textCodeBlock-background': '#f8f8f8',
  '--vscode-dropdown-background': '#ffffff',
  '--vscode-dropdown-border': '#cecece',
  '--vscode-dropdown-foreground': '#3b3b3b',
  '--vscode-textLink-foreground': '#005fb8',
  '--vscode-errorForeground': '#e51400',
  '--vscode-inputValidation-errorBackground': '#f2dede',
  '--vscode-gitDecoration-addedResourceForeground': '#587c0c',
  '--vscode-gitDecoration-deletedResourceForeground': '#ad0707',
};

/** Sets the page's theme variables and body class, as VS Code does when the theme changes. */
export async function setTheme(page: Page, theme: Record<string, string>, kind: 'vscode-dark' | 'vscode-light'): Promise<void> {
  await page.evaluate(
    ([vars, cls]) => {
      for (const [k, v] of Object.entries(vars)) {
        document.documentElement.style.setProperty(k, v);
      }
      document.body.classList.remove('vscode-dark', 'vscode-light');
      document.body.classList.add(cls);
    },
    [theme, kind] as const,
  );
}

/** Serves the page and the built webview files (out/webview, and out/common that it imports). */
async function serve(page: Page, html: string): Promise<void> {
  await page.route(`${ORIGIN}/**`, async (route) => {
    const url = new URL(route.request().url());
    let file: string | undefined;
    if (url.pathname === '/index.html') {
      await route.fulfill({ status: 200, contentType: 'text/html', body: html });
      return;
    }
    if (url.pathname === '/chat.css') {
      file = path.join(ROOT, 'media', 'chat.css');
    } else if (url.pathname.startsWith('/common/')) {
      file = path.join(ROOT, 'out', url.pathname);
    } else {
      file = path.join(ROOT, 'out', 'webview', url.pathname);
    }
    if (!file.startsWith(path.join(ROOT, 'out')) && !file.endsWith('chat.css')) {
      await route.fulfill({ status: 404, body: 'not found' });
      return;
    }
    if (!fs.existsSync(file)) {
      await route.fulfill({ status: 404, body: `missing ${file}` });
      return;
    }
    const type = file.endsWith('.css') ? 'text/css' : 'text/javascript';
    await route.fulfill({ status: 200, contentType: type, body: fs.readFileSync(file) });
  });
}

/** The host side: the real reducer, and the messages the extension would post. */
export class Host {
  state: ChatState = initialState();
  constructor(private readonly page: Page) {}

  async send(message: HostToView): Promise<void> {
    await this.page.evaluate((m) => window.postMessage(m, '*'), message);
  }

  async apply(...events: ChatEvent[]): Promise<void> {
    for (const event of events) {
      const next = reduce(this.state, event);
      const messages = viewMessages(this.state, next);
      this.state = next;
      for (const m of messages) {
        await this.send(m);
      }
    }
  }

  update(update: SessionUpdate): Promise<void> {
    return this.apply({ type: 'update', update });
  }
}

/** What the page posted to the host so far. */
export async function posted(page: Page): Promise<unknown[]> {
  return page.evaluate(() => (window as unknown as { __posted: unknown[] }).__posted);
}

export async function clearPosted(page: Page): Promise<void> {
  await page.evaluate(() => {
    (window as unknown as { __posted: unknown[] }).__posted = [];
  });
}

export interface ViewPage {
  browser: Browser;
  page: Page;
  /** Console errors and warnings, page errors and remote requests seen so far. */
  problems: string[];
}

/** A browser with the chat page loaded at `width` × `height`, dark theme, ready. */
export async function openViewPage(width: number, height = 800): Promise<ViewPage> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') {
      problems.push(`console ${msg.type()}: ${msg.text()}`);
    }
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  await page.route(/^(?!https:\/\/parley-webview\.test\/).*/, (route) => {
    problems.push(`remote request: ${route.request().url()}`);
    return route.abort();
  });
  await page.addInitScript((theme: Record<string, string>) => {
    const w = window as unknown as { __posted: unknown[]; __state: unknown; acquireVsCodeApi: () => unknown };
    w.__posted = [];
    w.__state = undefined;
    w.acquireVsCodeApi = () => ({
      postMessage: (m: unknown) => w.__posted.push(m),
      getState: () => w.__state,
      setState: (s: unknown) => {
        w.__state = s;
      },
    });
    const applyTheme = () => {
      for (const [k, v] of Object.entries(theme)) {
        document.documentElement.style.setProperty(k, v);
      }
      document.body?.classList.add('vscode-dark');
    };
    if (document.documentElement) {
      applyTheme();
    }
    document.addEventListener('DOMContentLoaded', applyTheme);
  }, DARK);
  const html = chatPageHtml({
    cspSource: ORIGIN,
    nonce: 'testnonce0123456789abcdef',
    scriptUri: `${ORIGIN}/main.js`,
    markdownItUri: `${ORIGIN}/vendor/markdown-it.min.js`,
    highlightUri: `${ORIGIN}/vendor/highlight.min.js`,
    styleUri: `${ORIGIN}/chat.css`,
  });
  await serve(page, html);
  await page.goto(`${ORIGIN}/index.html`);
  await page.waitForFunction(() => (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'));
  return { browser, page, problems };
}
