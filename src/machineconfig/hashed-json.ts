// JSON.stringify's text of a large value together with its SHA-256 and UTF-8 size, made in pieces
// so that the whole text is never copied into one string.
//
// JSON.stringify returns a megabyte of text as a chain of pieces; the first thing that reads it
// as bytes (a hash, Buffer.byteLength) first copies it into one flat string, and a string that
// size is allocated outside V8's young generation, on fresh pages: on this project's machines
// that copy cost as much CPU as the JSON.stringify itself (5-10 ms for a 1 MiB rendered config).
// Hashing pieces of a few kilobytes instead gives the same digest (SHA-256 of a concatenation is
// SHA-256 fed its parts in order), and each piece is flattened where small strings are cheap.

import { createHash } from 'node:crypto';

/** Arrays longer than this are serialized a slice at a time. */
const SLICE = 128;
/** Small pieces are fed to the hash once this many characters have gathered. */
const SMALL_CHARS = 4096;

export interface HashedJson {
  /** Exactly JSON.stringify(value). */
  text: string;
  /** Its length in UTF-8 bytes (Buffer.byteLength(text)). */
  bytes: number;
  /** SHA-256 of its UTF-8 bytes, in hex. */
  sha256: string;
}

/**
 * JSON.stringify(value) with its SHA-256 and byte length. The value must be JSON data (what
 * JSON.stringify serializes without toJSON or a replacer; other values are handed to
 * JSON.stringify whole, which is still correct, only not split).
 */
export function hashedJson(value: unknown): HashedJson {
  const sink = new Sink();
  write(value, sink);
  return sink.finish();
}

class Sink {
  readonly #hash = createHash('sha256');
  #text = '';
  /** Small pieces (brackets, keys, short values) gathered so that each update() is worth its call. */
  #small = '';
  #bytes = 0;

  push(piece: string): void {
    this.#small += piece;
    if (this.#small.length >= SMALL_CHARS) this.#flushSmall();
  }

  /** A piece of a few kilobytes: hashed as it is, without being copied into a batch first. */
  pushLarge(piece: string): void {
    this.#flushSmall();
    this.#add(piece);
  }

  #flushSmall(): void {
    if (this.#small === '') return;
    this.#add(this.#small);
    this.#small = '';
  }

  #add(piece: string): void {
    // update() flattens the piece (a small string, in the young generation); byteLength then
    // reads that flat copy. The text itself stays a chain of these pieces.
    this.#hash.update(piece);
    this.#bytes += Buffer.byteLength(piece);
    this.#text += piece;
  }

  finish(): HashedJson {
    this.#flushSmall();
    return { text: this.#text, bytes: this.#bytes, sha256: this.#hash.digest('hex') };
  }
}

function write(value: unknown, sink: Sink): void {
  if (Array.isArray(value)) {
    if (value.length <= SLICE) {
      sink.pushLarge(JSON.stringify(value));
      return;
    }
    // `[a,b]` per slice, without its brackets (a slice of the flattened text, not a copy); the
    // brackets between slices become commas.
    sink.push('[');
    for (let i = 0; i < value.length; i += SLICE) {
      if (i > 0) sink.push(',');
      const part = JSON.stringify(value.slice(i, i + SLICE));
      sink.pushLarge(part.slice(1, -1));
    }
    sink.push(']');
    return;
  }
  if (!isPlainData(value)) {
    // Strings, numbers, booleans, null, and anything JSON.stringify treats specially.
    const text = JSON.stringify(value);
    if (text !== undefined) sink.push(text);
    return;
  }
  // JSON.stringify's own order (Object.keys) and its rule for members it leaves out.
  sink.push('{');
  let first = true;
  for (const key of Object.keys(value)) {
    const member = value[key];
    if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
    sink.push((first ? '' : ',') + JSON.stringify(key) + ':');
    first = false;
    write(member, sink);
  }
  sink.push('}');
}

/** A plain object without toJSON: JSON.stringify writes its own enumerable members and nothing else. */
function isPlainData(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as object | null;
  return (proto === Object.prototype || proto === null) && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}
