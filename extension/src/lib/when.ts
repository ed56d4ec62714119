// Times as a person reads them at a glance (docs/extension.md, "The popup"):
// "5 min ago", "in 89 days". The exact time goes in a tooltip beside them.

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/** "less than a minute", "3 min", "1 h 5 min", "2 days": the span between two instants. */
export function span(ms: number): string {
  const t = Math.max(0, ms);
  if (t < MIN) return 'less than a minute';
  if (t < HOUR) return `${Math.floor(t / MIN)} min`;
  if (t < DAY) {
    const h = Math.floor(t / HOUR);
    const m = Math.floor((t % HOUR) / MIN);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  const d = Math.floor(t / DAY);
  return d === 1 ? '1 day' : `${d} days`;
}

/** How long since `since`: "3 min". */
export function duration(since: number, now = Date.now()): string {
  return span(now - since);
}

/** "5 min ago", or "just now". */
export function ago(at: number, now = Date.now()): string {
  return now - at < MIN ? 'just now' : `${span(now - at)} ago`;
}

/** "in 89 days", or "now" once it is due. */
export function fromNow(at: number, now = Date.now()): string {
  if (at - now <= 0) return 'now';
  if (at - now < MIN) return `in ${Math.ceil((at - now) / 1000)} s`;
  return `in ${span(at - now)}`;
}

/** The exact time, for a tooltip. */
export function exact(at: number): string {
  return new Date(at).toLocaleString();
}
