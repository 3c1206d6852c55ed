/**
 * What the chat view says to a screen reader: only what is new. The transcript itself is not
 * a live region (it would read every streamed chunk); a polite status region says that Parley
 * is answering, then the finished answer and any notice (an error, "Stopped.").
 */

/** The longest answer read out whole; a longer one is cut (the transcript holds all of it). */
const MAX_SPOKEN = 600;

export class Announcer {
  private queue: string[] = [];
  private scheduled = false;

  constructor(private readonly region: HTMLElement) {}

  /** Says `text` (after what is already queued this moment). */
  say(text: string): void {
    const t = text.trim();
    if (!t) {
      return;
    }
    this.queue.push(t.length > MAX_SPOKEN ? `${t.slice(0, MAX_SPOKEN - 1)}…` : t);
    if (!this.scheduled) {
      this.scheduled = true;
      // One change per moment: a region's text replaced twice at once is read once.
      setTimeout(() => this.flush(), 0);
    }
  }

  private flush(): void {
    this.scheduled = false;
    this.region.textContent = this.queue.join(' ');
    this.queue = [];
  }
}
