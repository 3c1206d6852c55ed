/**
 * Issue 43: an edit's question answered from VS Code's diff editor. In a real workbench
 * (code-server, the packaged .vsix, the real `parley serve` from the project's virtualenv
 * against the fake LLM), "Open diff" on the chat's question opens the diff editor with Allow
 * Edit and Reject Edit in its title; each answers the question as the card's buttons do, and
 * the diff tab closes once the edit is decided — from the diff editor or from the card — so no
 * stale proposal stays open, nor after the turn is undone.
 */

import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { type Browser, type FrameLocator, type Page, chromium } from 'playwright-core';

import { FakeLLM, PARLEY, serverUnavailable } from './harness';
import {
  CHROMIUM,
  DARK,
  OUTPUT,
  type Profile,
  VSIX,
  chatFrame,
  codeServerEntry,
  freePort,
  haveChromium,
  makeProfile,
  paletteCommand,
  startCodeServer,
  stopProcess,
  writeSettings,
} from './workbenchHarness';

const write = (name: string, content: string) => ({ name: 'write_file', arguments: { path: name, content } });

describe("an edit decided from VS Code's diff editor (code-server)", { skip: haveChromium ? false : `no Chromium at ${CHROMIUM}` }, () => {
  let skip: string | undefined;
  let fake: FakeLLM | undefined;
  let profile: Profile | undefined;
  let codeServer: ChildProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let chat: FrameLocator;
  const log: string[] = [];

  before(async () => {
    skip = await serverUnavailable();
    if (skip) {
      return;
    }
    assert.ok(fs.existsSync(VSIX), `the packaged extension ${VSIX} (npm run package)`);
    const entry = codeServerEntry();
    profile = makeProfile();
    fake = await FakeLLM.start();
    writeSettings(profile, fake, DARK, false, { 'parley.serverCommand': PARLEY });
    const config = ['--config', path.join(profile.base, 'code-server.yaml')];
    execFileSync(process.execPath, [entry, ...config, '--user-data-dir', profile.userData, '--extensions-dir', profile.extensions, '--install-extension', VSIX], {
      env: { ...process.env, XDG_CONFIG_HOME: profile.base },
    });
    const port = await freePort();
    codeServer = await startCodeServer(entry, profile, port, log);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 })).newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(profile.workspace)}`);
    await page.locator('.activitybar .action-item a[aria-label^="Parley"]').first().waitFor({ timeout: 60_000 });
    await paletteCommand(page, 'Parley: Open Chat');
    chat = chatFrame(page);
    await chat.locator('#prompt').waitFor();
    await page.locator('.statusbar').getByText(/gpt-4\.1-mini/).waitFor({ timeout: 60_000 });
    fs.mkdirSync(OUTPUT, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    await stopProcess(codeServer);
    await fake?.stop();
    if (profile) {
      fs.rmSync(profile.base, { recursive: true, force: true });
    }
  });

  /** The editor tabs showing a proposal of Parley's. */
  const proposalTabs = () => page.locator('.tabs-container .tab', { hasText: 'proposed by Parley' });
  const titleAction = (name: string) => page.locator('.editor-actions').getByRole('button', { name });

  /** Sends `text`; the question about the edit its turn makes; its diff opened from the card. */
  async function askAndOpenDiff(text: string): Promise<ReturnType<FrameLocator['locator']>> {
    await chat.locator('#prompt').fill(text);
    await chat.locator('#prompt').press('Enter');
    const question = chat.locator('.entry-permission').last();
    await question.getByText('Parley asks permission').waitFor();
    await question.locator('button.diff-open').click();
    await proposalTabs().first().waitFor();
    return question;
  }

  it('Allow Edit in the diff editor answers the question, and the diff tab closes', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await fake!.script([{ tool_calls: [write('notes.txt', 'first\n')] }, { text: 'Written.' }, { tool_calls: [write('todo.txt', 'second\n')] }, { text: 'Not written.' }]);
    const question = await askAndOpenDiff('Write the notes.');
    await titleAction('Allow Edit').waitFor();
    await titleAction('Reject Edit').waitFor();
    await page.locator('.part.editor').screenshot({ path: path.join(OUTPUT, 'workbench-diff-actions.png') });
    await titleAction('Allow Edit').click();
    await chat.locator('.entry-agent', { hasText: 'Written.' }).waitFor();
    assert.match(await question.locator('.permission-answer').innerText(), /^Allowed once: /);
    assert.equal(fs.readFileSync(path.join(profile!.workspace, 'notes.txt'), 'utf8'), 'first\n');
    await proposalTabs().first().waitFor({ state: 'detached' });
  });

  it('a question answered from the card closes its diff tab; Reject Edit is no longer offered', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    const question = await askAndOpenDiff('Write the to-do list.');
    await question.locator('button[data-kind="reject_once"]').click();
    await chat.locator('.entry-agent', { hasText: 'Not written.' }).waitFor();
    await proposalTabs().first().waitFor({ state: 'detached' });
    assert.equal(fs.existsSync(path.join(profile!.workspace, 'todo.txt')), false);
    assert.equal(await titleAction('Reject Edit').count(), 0);
  });

  it('after the turn is undone, no proposal is left open', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await chat.locator('.entry-turn button', { hasText: 'Undo turn' }).first().click();
    await chat.locator('.entry-turn', { hasText: 'Undone' }).first().waitFor();
    assert.equal(fs.existsSync(path.join(profile!.workspace, 'notes.txt')), false);
    assert.equal(await proposalTabs().count(), 0);
  });
});
