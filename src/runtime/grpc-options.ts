// Channel settings shared by the server and its clients. Agent streams stay open for months:
// keepalive pings find dead peers (a NAT that dropped the flow, a host that lost power) within
// about a minute and a half, and are sparse enough that 5,000 idle agents cost almost nothing.

import type { ChannelOptions } from '@grpc/grpc-js';

export const KEEPALIVE_TIME_MS = 60_000;
export const KEEPALIVE_TIMEOUT_MS = 20_000;
export const MAX_SERVER_RECEIVE_BYTES = 8 * 1024 * 1024;

export const SERVER_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
  'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
  // Clients may ping every 30 s without being told to back off (GOAWAY too_many_pings).
  'grpc.http2.min_ping_interval_without_data_ms': 30_000,
  'grpc.keepalive_permit_without_calls': 1,
  // Never recycle a healthy agent stream for age.
  'grpc.max_connection_age_ms': 2 ** 31 - 1,
  // One limit for every method (grpc-js has no per-method one). 8 MiB is five times the largest
  // rendered config (1.5 MiB) for an Apply, and refuses a runaway agent's status report with
  // RESOURCE_EXHAUSTED on that stream before the server buffers or parses it.
  'grpc.max_receive_message_length': MAX_SERVER_RECEIVE_BYTES,
  // Nothing serves channelz, and it keeps trackers and traces for every connection and call.
  'grpc.enable_channelz': 0,
};

export const CLIENT_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
  'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_receive_message_length': 16 * 1024 * 1024,
  // HTTP/2 flow control: how much the server may send before this client acknowledges it. At
  // the default 64 KiB a 1 MiB node list needs 16 round trips, each waiting for the server's
  // loop to read a WINDOW_UPDATE, which under a fan-out took longer than the list itself.
  'grpc-node.flow_control_window': 4 * 1024 * 1024,
  'grpc.enable_channelz': 0,
  // The server certificate names the server's host; tests and demos reach it as 127.0.0.1.
};
