// An Apply's manifests, read and validated once: what Apply stores, the warnings it answers with
// and the dry-run preview are decided from the same objects, so they cannot disagree about what
// the request holds, and no text is parsed twice.

import { InvalidDocumentError, type Problem } from './errors.ts';
import { parseDocuments, readDocuments, type ParsedManifests } from './manifest.ts';
import { YamlBudget } from './yaml-expansion.ts';

/** A request's valid objects, in the order of its documents (`problems` is empty). */
export type ApplyRequest = Readonly<ParsedManifests>;

/** Reads every text of the request and validates every document; all the problems, or the objects. */
export function parseApplyRequest(manifests: readonly { source: string; text: string }[]): ApplyRequest {
  const problems: Problem[] = [];
  // One budget for every text: what the request's YAML may cost is bounded as a whole.
  const yamlBudget = new YamlBudget();
  const documents = manifests.flatMap(({ source, text }) => {
    const read = readDocuments(text, source, yamlBudget);
    problems.push(...read.problems);
    return read.documents;
  });
  const parsed = parseDocuments(documents);
  problems.push(...parsed.problems);
  if (problems.length) throw new InvalidDocumentError(problems);
  if (documents.length === 0) {
    throw new InvalidDocumentError([{ object: 'request', field: 'manifests', rule: 'required', message: 'no documents to apply' }]);
  }
  return parsed;
}
