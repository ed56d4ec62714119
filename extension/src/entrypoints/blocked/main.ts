// The page an agent tab is stopped on (docs/policy.md, "Enforcement in the browser"):
// what it was headed to and which rule refused it, as text only.

const q = new URLSearchParams(location.search);
const $ = (id: string) => document.getElementById(id) as HTMLElement;
const host = (q.get('host') ?? '').slice(0, 253);
const pattern = (q.get('pattern') ?? '').slice(0, 253);
const WHY: Record<string, string> = {
  site_blocked: `It matches ${pattern ? `the blocked pattern ${pattern}` : 'a blocked pattern'}.`,
  site_not_allowed: 'It is not among the sites this session may open.',
  scheme_not_allowed: 'Pages of this kind are not allowed in this session.',
};
$('host').textContent = host || '(unknown)';
$('why').textContent = WHY[q.get('reason') ?? ''] ?? 'The session’s policy does not allow it.';
