// What a node name may be: an RFC 1123 subdomain, as Kubernetes requires of a Node's name. Dot-
// separated labels of lowercase letters, digits and "-", each starting and ending with a letter
// or digit, 253 characters at most. A name such as "a..b" or "a.-b" is none: it cannot be a host
// name, and two spellings of one name must not become two nodes. One rule for every door a node
// name comes through (enrollment, requests to join, registration, mcctl pki node, agent.yaml).

/** The rule's name, as problems and errors cite it. */
export const NODE_NAME_RULE = 'rfc1123-subdomain';
export const MAX_NODE_NAME_CHARS = 253;

// Labels as above, joined by single dots: one test, with no array of labels made for each name
// (every MachineConfig's name is checked on every render of its pool's configs).
const SUBDOMAIN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;

/** True when `name` is an RFC 1123 subdomain of at most 253 characters. */
export function isDnsSubdomain(name: string): boolean {
  return name.length > 0 && name.length <= MAX_NODE_NAME_CHARS && SUBDOMAIN.test(name);
}

/** Why `name` cannot name a node (what is wrong and the rule), or undefined when it can. */
export function nodeNameProblem(name: string): string | undefined {
  if (isDnsSubdomain(name)) return undefined;
  const shown = JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);
  const why = name.length === 0 ? 'it is empty'
    : name.length > MAX_NODE_NAME_CHARS ? `it is ${name.length} characters long (at most ${MAX_NODE_NAME_CHARS})`
    : name.split('.').some((l) => l === '') ? 'it has an empty label (a leading, trailing or doubled ".")'
    : 'it has a label that is not lowercase letters, digits and "-", starting and ending with a letter or digit';
  return `${shown} is not a DNS subdomain: ${why}; a node name must be an RFC 1123 subdomain (rule ${NODE_NAME_RULE}: dot-separated labels of lowercase letters, digits and "-", each starting and ending with a letter or digit, at most ${MAX_NODE_NAME_CHARS} characters)`;
}
