// etcd's v3 gRPC API, loaded from the trimmed copies of etcd's own protos under proto/etcd/, and
// the TypeScript shapes of the messages mcplane sends and reads. keepCase keeps etcd's field
// names (mod_revision, TTL); longs as String because revisions and lease ids are int64 (a lease
// id uses all 63 bits); bytes arrive as Buffers and must be sent as Buffers (protobufjs would
// read a string as base64).

import { loadPackageDefinition, type Client, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { join } from 'node:path';
import { protoDir } from '../../runtime/proto.ts';

export interface EtcdServices {
  KV: ServiceClientConstructor;
  Watch: ServiceClientConstructor;
  Lease: ServiceClientConstructor;
  Maintenance: ServiceClientConstructor;
}

let cached: EtcdServices | undefined;

export function loadEtcdServices(): EtcdServices {
  if (!cached) {
    const definition = loadSync(['etcdserverpb/rpc.proto'], {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [join(protoDir(), 'etcd')],
    });
    const pkg = (loadPackageDefinition(definition) as GrpcObject).etcdserverpb as GrpcObject;
    cached = {
      KV: pkg.KV as ServiceClientConstructor,
      Watch: pkg.Watch as ServiceClientConstructor,
      Lease: pkg.Lease as ServiceClientConstructor,
      Maintenance: pkg.Maintenance as ServiceClientConstructor,
    };
  }
  return cached;
}

export type EtcdServiceName = keyof EtcdServices;
export type EtcdClients = Record<EtcdServiceName, Client>;

/** int64 fields as proto-loader gives them (longs: String). */
export type Int64 = string;

export interface ResponseHeader {
  revision: Int64;
  member_id: Int64;
}

export interface KeyValue {
  key: Buffer;
  create_revision: Int64;
  mod_revision: Int64;
  version: Int64;
  value: Buffer;
  lease: Int64;
}

export interface RangeRequest {
  key: Buffer;
  range_end?: Buffer;
  limit?: number;
  revision?: Int64 | number;
  serializable?: boolean;
  keys_only?: boolean;
  count_only?: boolean;
}

export interface RangeResponse {
  header: ResponseHeader;
  kvs: KeyValue[];
  more: boolean;
  count: Int64;
}

export interface Compare {
  result: 'EQUAL' | 'GREATER' | 'LESS' | 'NOT_EQUAL';
  target: 'VERSION' | 'CREATE' | 'MOD' | 'VALUE' | 'LEASE';
  key: Buffer;
  create_revision?: Int64;
  mod_revision?: Int64;
}

export type RequestOp =
  | { request_range: RangeRequest }
  | { request_put: { key: Buffer; value: Buffer; lease?: Int64 } }
  | { request_delete_range: { key: Buffer; prev_kv?: boolean } };

export interface ResponseOp {
  response?: 'response_range' | 'response_put' | 'response_delete_range' | 'response_txn';
  response_range?: RangeResponse;
  response_delete_range?: { deleted: Int64; prev_kvs: KeyValue[] };
}

export interface TxnRequest {
  compare: Compare[];
  success: RequestOp[];
  failure: RequestOp[];
}

export interface TxnResponse {
  header: ResponseHeader;
  succeeded: boolean;
  responses: ResponseOp[];
}

export interface WatchEvent {
  type: 'PUT' | 'DELETE';
  kv: KeyValue;
  prev_kv: KeyValue | null;
}

export interface WatchResponse {
  header: ResponseHeader;
  watch_id: Int64;
  created: boolean;
  canceled: boolean;
  compact_revision: Int64;
  cancel_reason: string;
  fragment: boolean;
  events: WatchEvent[];
}

export interface LeaseGrantResponse {
  header: ResponseHeader;
  ID: Int64;
  TTL: Int64;
  error: string;
}

export interface LeaseKeepAliveResponse {
  header: ResponseHeader;
  ID: Int64;
  TTL: Int64;
}

export interface StatusResponse {
  header: ResponseHeader;
  version: string;
  leader: Int64;
}
