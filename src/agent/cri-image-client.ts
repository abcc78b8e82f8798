// A client of the container runtime's CRI image service (k8s.io/cri-api runtime.v1) over its unix
// socket, as the kubelet and MCO's pinned image manager talk to CRI-O: gRPC without TLS, the
// socket's file permissions being the access control. Only the calls the pinned image puller
// makes; the contract is proto/cri/runtime/v1/image-service.proto, a subset of the real api.proto.

import { credentials, loadPackageDefinition, status as Status, type Client, type GrpcObject, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { join } from 'node:path';
import { CriCallError } from '../machineconfig/errors.ts';
import { protoDir } from '../runtime/proto-files.ts';

/** CRI-O's socket on RHCOS, what MCO dials. */
export const CRIO_SOCKET = '/var/run/crio/crio.sock';

export interface CriImage {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  size: number;
  pinned: boolean;
}

export interface CriFilesystemUsage {
  /** Nanoseconds since the epoch at which the runtime measured. */
  timestamp: number;
  mountpoint: string;
  /** Bytes the runtime's images take on it (not the file system's whole use). */
  usedBytes: number | null;
  inodesUsed: number | null;
}

export interface CriImageFsInfo {
  imageFilesystems: CriFilesystemUsage[];
  containerFilesystems: CriFilesystemUsage[];
}

export interface CriAuth {
  username?: string;
  password?: string;
  auth?: string;
  serverAddress?: string;
  identityToken?: string;
  registryToken?: string;
}

let service: ServiceClientConstructor | undefined;

function imageService(): ServiceClientConstructor {
  // keepCase false as mcplane's own contract; uint64 sizes as Number (exact below 2^53 bytes).
  service ??= ((loadPackageDefinition(loadSync(['runtime/v1/image-service.proto'], {
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [join(protoDir(), 'cri')],
  })) as GrpcObject).runtime as GrpcObject as { v1: GrpcObject }).v1.ImageService as ServiceClientConstructor;
  return service;
}

interface RawImage { id: string; repoTags: string[]; repoDigests: string[]; size: number; pinned: boolean }
interface RawUsage { timestamp: number; fsId: { mountpoint: string } | null; usedBytes: { value: number } | null; inodesUsed: { value: number } | null }

export interface CriImageClientOptions {
  /** Per call, except PullImage: a status or a file system query answers at once or not at all. */
  callTimeoutMs?: number;
  /** PullImage's deadline: a large image over a slow link takes minutes. */
  pullTimeoutMs?: number;
}

type UnaryClient = Client & Record<string, (req: unknown, opts: { deadline: number }, cb: (err: ServiceError | null, res: unknown) => void) => void>;

export class CriImageClient {
  readonly #client: UnaryClient;
  readonly #callTimeoutMs: number;
  readonly #pullTimeoutMs: number;

  readonly socketPath: string;
  constructor(socketPath: string, options: CriImageClientOptions = {}) {
    this.socketPath = socketPath;
    const Ctor = imageService();
    this.#client = new Ctor(`unix://${socketPath}`, credentials.createInsecure()) as UnaryClient;
    this.#callTimeoutMs = options.callTimeoutMs ?? 30_000;
    this.#pullTimeoutMs = options.pullTimeoutMs ?? 30 * 60_000;
  }

  /** The image as the runtime knows it under `image` (a name or a digest reference), or null when absent. */
  async imageStatus(image: string): Promise<CriImage | null> {
    const res = await this.#call<{ image: RawImage | null }>('ImageStatus', { image: { image }, verbose: false });
    return res.image ? toImage(res.image) : null;
  }

  /** Pulls `image`; resolves to the runtime's reference of the pulled image (PullImageResponse.image_ref). */
  async pullImage(image: string, auth?: CriAuth): Promise<string> {
    const res = await this.#call<{ imageRef: string }>('PullImage', { image: { image, userSpecifiedImage: image }, auth: auth ?? null }, this.#pullTimeoutMs);
    return res.imageRef;
  }

  async listImages(): Promise<CriImage[]> {
    const res = await this.#call<{ images: RawImage[] }>('ListImages', { filter: null });
    return res.images.map(toImage);
  }

  async imageFsInfo(): Promise<CriImageFsInfo> {
    const res = await this.#call<{ imageFilesystems: RawUsage[]; containerFilesystems: RawUsage[] }>('ImageFsInfo', {});
    return { imageFilesystems: res.imageFilesystems.map(toUsage), containerFilesystems: res.containerFilesystems.map(toUsage) };
  }

  close(): void {
    this.#client.close();
  }

  #call<T>(method: string, request: unknown, timeoutMs = this.#callTimeoutMs): Promise<T> {
    return new Promise((resolve, reject) => {
      this.#client[method]!(request, { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) reject(new CriCallError(method, `${Status[err.code] ?? err.code}: ${err.details || err.message}`, { cause: err }));
        else resolve(res as T);
      });
    });
  }
}

function toImage(raw: RawImage): CriImage {
  return { id: raw.id, repoTags: raw.repoTags, repoDigests: raw.repoDigests, size: raw.size, pinned: raw.pinned };
}

function toUsage(raw: RawUsage): CriFilesystemUsage {
  return { timestamp: raw.timestamp, mountpoint: raw.fsId?.mountpoint ?? '', usedBytes: raw.usedBytes?.value ?? null, inodesUsed: raw.inodesUsed?.value ?? null };
}
