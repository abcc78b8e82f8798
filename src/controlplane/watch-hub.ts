import { EventEmitter } from 'node:events';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchNotice {
  type: WatchEventType;
  kind: 'pool' | 'node';
  name: string;
}

/** Fans out pool and node changes to every Watch stream. */
export class WatchHub extends EventEmitter<{ notice: [WatchNotice] }> {
  constructor() {
    super();
    this.setMaxListeners(0);
  }

  publish(notice: WatchNotice): void {
    this.emit('notice', notice);
  }
}
