// ListNodes answers made of each node's wire bytes, encoded once per node view. A profile of the
// status thread under a fan-out at 5,000 agents showed it busy half the time turning the same
// unchanged nodes into protobuf for every ListNodes (proto-loader's fromObject, then encode):
// a list of 5,000 took about 150 ms of CPU, and a GetPool queued behind it. A node's view is
// immutable and replaced whenever it changes (cache/cluster-cache.ts), so its bytes are kept
// beside it; a list is then the concatenation protobuf allows for a repeated field.

import { PreEncoded } from '../../runtime/pre-encoded.ts';
import type { Node } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { NodeView } from '../cache/cluster-cache.ts';

/** ListNodesResponse's fields (proto/mcplane/v1/status.proto). */
const NODES_FIELD = 1;
const CONTINUE_TOKEN_FIELD = 2;
const REMAINING_ITEM_COUNT_FIELD = 3;
const LENGTH_DELIMITED = 2;
const VARINT = 0;

export class NodeListEncoder {
  readonly #bytes = new WeakMap<NodeView, Buffer>();

  private readonly toWire: (view: NodeView) => Node;
  private readonly encodeNode: (node: Node) => Buffer;
  /**
   * @param toWire the node as the API shows it (to-wire.ts)
   * @param encodeNode protobuf bytes of one mcplane.v1.Node (the contract's own serializer)
   */
  constructor(toWire: (view: NodeView) => Node, encodeNode: (node: Node) => Buffer) {
    this.toWire = toWire;
    this.encodeNode = encodeNode;
  }

  /** One node's bytes, encoded the first time this view is asked for. */
  nodeBytes(view: NodeView): Buffer {
    let bytes = this.#bytes.get(view);
    if (!bytes) {
      bytes = this.encodeNode(this.toWire(view));
      this.#bytes.set(view, bytes);
    }
    return bytes;
  }

  /** A ListNodesResponse, ready for the wire (services wrapped by acceptingPreEncoded). */
  listResponse(views: readonly NodeView[], continueToken: string, remainingItemCount: number): PreEncoded {
    const nodes = views.map((v) => this.nodeBytes(v));
    const token = Buffer.from(continueToken, 'utf8');
    let size = 0;
    for (const bytes of nodes) size += 1 + varintSize(bytes.length) + bytes.length;
    if (token.length) size += 1 + varintSize(token.length) + token.length;
    if (remainingItemCount > 0) size += 1 + varintSize(remainingItemCount);
    const out = Buffer.allocUnsafe(size);
    let at = 0;
    const writeVarint = (value: number): void => {
      let v = value;
      while (v > 0x7f) {
        out[at++] = (v & 0x7f) | 0x80;
        v = Math.floor(v / 128);
      }
      out[at++] = v;
    };
    const writeBytes = (field: number, bytes: Buffer): void => {
      out[at++] = (field << 3) | LENGTH_DELIMITED;
      writeVarint(bytes.length);
      at += bytes.copy(out, at);
    };
    for (const bytes of nodes) writeBytes(NODES_FIELD, bytes);
    if (token.length) writeBytes(CONTINUE_TOKEN_FIELD, token);
    if (remainingItemCount > 0) {
      out[at++] = (REMAINING_ITEM_COUNT_FIELD << 3) | VARINT;
      writeVarint(remainingItemCount);
    }
    return new PreEncoded(out);
  }
}

function varintSize(value: number): number {
  let n = 1;
  for (let v = value; v > 0x7f; v = Math.floor(v / 128)) n++;
  return n;
}
