/**
 * The chat view's real page in headless Chromium (Debian's, driven by playwright-core) with a
 * stand-in for the VS Code webview API — the one harness of the view's page tests
 * (webview.test.ts, viewChrome.test.ts, messageRendering.test.ts): the page's HTML with its
 * CSP, its script modules and vendor scripts from out/webview (or `PARLEY_WEBVIEW_DIR`, to
 * measure another build), VS Code's theme variables for Dark Modern and Light Modern, and the
 * host side (the real reducer and host→view bridge).
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';

import type { SessionUpdate } from '../src/client/protocol';
import type { HostToView } from '../src/common/view';
import { type ChatEvent, type ChatState, initialState, reduce } from '../src/core/chatState';
import { CHAT_STYLESHEETS, chatPageHtml, viewMessages } from '../src/core/webviewHtml';

export const ROOT = path.resolve(__dirname, '..', '..');
export const OUTPUT = path.join(ROOT, 'test-output');
export const ORIGIN = 'https://parley-webview.test';
export const CHROMIUM = process.env.PARLEY_CHROMIUM ?? '/usr/bin/chromium';
export const haveChromium = fs.existsSync(CHROMIUM);
const WEBVIEW_DIR = process.env.PARLEY_WEBVIEW_DIR ?? path.join(ROOT, 'out', 'webview');

/** VS Code's Dark Modern colours for the variables the page uses (VS Code injects these). */
export const DARK: Record<string, string> = {
  '--vscode-font-family': 'system-ui, "Ubuntu", "Droid Sans", sans-serif',
  '--vscode-font-size': '13px',
  '--vscode-editor-font-family': '"Droid Sans Mono", "monospace", monospace',
  '--vscode-editor-font-size': '12px',
  '--vscode-foreground': '#cccccc',
  '--vscode-descriptionForeground': '#9d9d9d',
  '--vscode-sideBar-background': '#181818',
  '--vscode-editor-background': '#1f1f1f',
  '--vscode-editor-foreground': '#cccccc',
  '--vscode-widget-border': '#313131',
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
  '--vscode-toolbar-hoverBackground': 'rgba(90, 93, 94, 0.31)',
  '--vscode-textLink-foreground': '#4daafc',
  '--vscode-textCodeBlock-background': '#2b2b2b',
  '--vscode-textPreformat-background': '#3c3c3c',
  '--vscode-textPreformat-foreground': '#d0d0d0',
  '--vscode-dropdown-background': '#313131',
  '--vscode-dropdown-border': '#3c3c3c',
  '--vscode-dropdown-foreground': '#cccccc',
  '--vscode-focusBorder': '#0078d4',
  '--vscode-errorForeground': '#f85149',
  '--vscode-inputValidation-errorBorder': '#be1100',
  '--vscode-inputValidation-errorBackground': '#5a1d1d',
  '--vscode-inputValidation-warningBorder': '#b89500',
  '--vscode-debugTokenExpression-name': '#c586c0',
  '--vscode-debugTokenExpression-string': '#ce9178',
  '--vscode-debugTokenExpression-boolean': '#4e94ce',
  '--vscode-debugTokenExpression-number': '#b5cea8',
  '--vscode-debugTokenExpression-error': '#f48771',
  '--vscode-symbolIcon-functionForeground': '#b180d7',
  '--vscode-symbolIcon-variableForeground': '#75beff',
  '--vscode-symbolIcon-classForeground': '#ee9d28',
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
  '--vscode-editor-background': '#ffffff',
  '--vscode-editor-foreground': '#3b3b3b',
  '--vscode-widget-border': '#e5e5e5',
  '--vscode-panel-border': '#e5e5e5',
  '--vscode-input-background': '#ffffff',
  '--vscode-input-foreground': '#3b3b3b',
  '--vscode-input-border': '#cecece',
  '--vscode-button-background': '#005fb8',
  '--vscode-button-secondaryBackground': '#e5e5e5',
  '--vscode-button-secondaryForeground': '#3b3b3b',
  '--vscode-toolbar-hoverBackground': 'rgba(184, 184, 184, 0.31)',
  '--vscode-textLink-foreground': '#005fb8',
  '--vscode-textCodeBlock-background': '#f8f8f8',
  '--vscode-textPreformat-background': 'rgba(0, 0, 0, 0.12)',
  '--vscode-textPreformat-foreground': '#3b3b3b',
  '--vscode-dropdown-background': '#ffffff',
  '--vscode-dropdown-border': '#cecece',
  '--vscode-dropdown-foreground': '#3b3b3b',
  '--vscode-errorForeground': '#e51400',
  '--vscode-inputValidation-errorBackground': '#f2dede',
  '--vscode-debugTokenExpression-name': '#9b46b0',
  '--vscode-debugTokenExpression-string': '#a31515',
  '--vscode-debugTokenExpression-boolean': '#0000ff',
  '--vscode-debugTokenExpression-number': '#098658',
  '--vscode-debugTokenExpression-error': '#e51400',
  '--vscode-symbolIcon-functionForeground': '#652d90',
  '--vscode-symbolIcon-variableForeground': '#007acc',
  '--vscode-symbolIcon-classForeground': '#d67e00',
  '--vscode-gitDecoration-addedResourceForeground': '#587c0c',
  '--vscode-gitDecoration-deletedResourceForeground': '#ad0707',
};

export type ThemeKind = 'vscode-dark' | 'vscode-light';

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export interface ChatPage {
  context: BrowserContext;
  page: Page;
  /** Console errors and warnings, page errors, requests for anything not local. */
  problems: string[];
}

/** Opens the chat page (CSP and all) in a new context, after the page script said `ready`. */
export async function openChatPage(
  browser: Browser,
  options: { width: number; height: number; clipboard?: boolean; scale?: number },
): Promise<ChatPage> {
  const context = await browser.newContext({ viewport: { width: options.width, height: options.height }, deviceScaleFactor: options.scale ?? 1 });
  if (options.clipboard) {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: ORIGIN });
  }
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') {
      problems.push(`console ${msg.type()}: ${msg.text()}`);
    }
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  // Anything not served by the stand-in webview origin is a remote resource: refuse it.
  await page.route(/^(?!https:\/\/parley-webview\.test\/).*/, (route) => {
    problems.push(`remote request: ${route.request().url()}`);
    return route.abort();
  });
  await page.addInitScript((theme: Record<string, string>) => {
    const w = window as unknown as { __posted: unknown[]; __state: unknown; acquireVsCodeApi: () => unknown; __markdownChars: number };
    w.__posted = [];
    w.__state = undefined;
    // Counts the characters markdown-it renders (the benchmark's measure of work that does not
    // depend on the machine's speed): wraps the factory the vendor script sets.
    type Md = { render(src: string, env?: unknown): string };
    w.__markdownChars = 0;
    let factory: ((options: unknown) => Md) | undefined;
    Object.defineProperty(window, 'markdownit', {
      configurable: true,
      get: () => factory,
      set: (real: (options: unknown) => Md) => {
        factory = (options: unknown) => {
          const md = real(options);
          const render = md.render.bind(md);
          md.render = (src: string, env?: unknown) => {
            w.__markdownChars += src.length;
            return render(src, env);
          };
          return md;
        };
      },
    });
    // VS Code lets a page acquire the API once; a second call throws there, so here too.
    let acquired = false;
    w.acquireVsCodeApi = () => {
      if (acquired) {
        throw new Error('acquireVsCodeApi called twice');
      }
      acquired = true;
      return {
        postMessage: (m: unknown) => w.__posted.push(m),
        getState: () => w.__state,
        setState: (s: unknown) => {
          w.__state = s;
        },
      };
    };
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
    styleUris: CHAT_STYLESHEETS.map((name) => `${ORIGIN}/media/chat/${name}`),
  });
  await page.route(`${ORIGIN}/**`, async (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === '/index.html') {
      return route.fulfill({ status: 200, contentType: 'text/html', body: html });
    }
    const file =
      url.pathname.startsWith('/media/chat/') && CHAT_STYLESHEETS.includes(path.basename(url.pathname))
        ? path.join(ROOT, 'media', 'chat', path.basename(url.pathname))
        : !url.pathname.endsWith('.js') || url.pathname.includes('..')
          ? undefined
          : url.pathname.startsWith('/common/') // main.js imports ../common/display.js
            ? path.join(ROOT, 'out', url.pathname)
            : path.join(WEBVIEW_DIR, url.pathname);
    if (!file || !fs.existsSync(file)) {
      return route.fulfill({ status: 404, body: 'not found' });
    }
    const type = file.endsWith('.css') ? 'text/css' : 'text/javascript';
    return route.fulfill({ status: 200, contentType: type, body: fs.readFileSync(file) });
  });
  await page.goto(`${ORIGIN}/index.html`);
  await page.waitForFunction(() => (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'));
  return { context, page, problems };
}

/** Sets the page's theme variables and body class, as VS Code does when the theme changes. */
export async function setTheme(page: Page, kind: ThemeKind): Promise<void> {
  const theme = kind === 'vscode-dark' ? DARK : LIGHT;
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

/** Posts a host message to the page, as the extension does. */
export async function postToPage(page: Page, message: HostToView): Promise<void> {
  // A posted message is handled in a later task: wait for it, so that what the test reads
  // next is the page after the message. A listener added now runs after the page's own.
  await page.evaluate(
    (m) =>
      new Promise<void>((resolve) => {
        window.addEventListener('message', () => resolve(), { once: true });
        window.postMessage(m, '*');
      }),
    message,
  );
}

/** What the page posted to the host so far. */
export async function posted(page: Page): Promise<{ type: string; [k: string]: unknown }[]> {
  return page.evaluate(() => (window as unknown as { __posted: { type: string }[] }).__posted);
}

/** Forgets what the page posted so far. */
export async function clearPosted(page: Page): Promise<void> {
  await page.evaluate(() => {
    (window as unknown as { __posted: unknown[] }).__posted = [];
  });
}

/** The host side: the real reducer, and the messages the extension would post. */
export class Host {
  state: ChatState = initialState();
  constructor(private readonly page: Page) {}

  async send(message: HostToView): Promise<void> {
    await postToPage(this.page, message);
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

  /** Streams `text` as chunks of `size` characters of one message. */
  async chunks(kind: 'agent_message_chunk' | 'agent_thought_chunk', messageId: string, text: string, size = 7): Promise<void> {
    for (let i = 0; i < text.length; i += size) {
      await this.update({ sessionUpdate: kind, messageId, content: { type: 'text', text: text.slice(i, i + size) } });
    }
  }
}

/** Waits until the page has drawn two more frames (a streamed message renders at the next one). */
export async function nextFrames(page: Page): Promise<void> {
  await page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
}

/**
 * The WCAG contrast ratio of each `selector` element's text colour against `background` (a
 * CSS colour as computed, opaque).
 */
export async function textContrasts(page: Page, selector: string, background: string): Promise<{ cls: string; colour: string; ratio: number }[]> {
  return page.locator(selector).evaluateAll((els, bg) => {
    const parse = (c: string): number[] => {
      const m = /rgba?\(([^)]+)\)/.exec(c);
      if (!m) {
        throw new Error(`a colour this test does not read: ${c}`);
      }
      return m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    };
    const lum = (c: number[]) => {
      const ch = (v: number) => {
        const x = v / 255;
        return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * ch(c[0]) + 0.7152 * ch(c[1]) + 0.0722 * ch(c[2]);
    };
    const b = lum(parse(bg));
    return els.map((el) => {
      const colour = getComputedStyle(el).color;
      const l = lum(parse(colour));
      return { cls: el.getAttribute('class') ?? '', colour, ratio: (Math.max(l, b) + 0.05) / (Math.min(l, b) + 0.05) };
    });
  }, background);
}
