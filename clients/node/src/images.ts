// Sandbox images (docs/images.md): root file systems built from Debian packages, which a
// session or a run names in its sandbox (`image`). The calls are on the daemon's Images
// service, over the client's one channel.
//
//   const build = client.buildImage("py", ["python3", "python3-pandas"]);
//   for await (const line of build) console.log(line);   // mmdebstrap's output
//   const image = await build.image;                      // READY, its digest and size
//   const session = await client.createSession({ image: "py" });
//   for (const i of await client.listImages()) console.log(i.name, i.digest);
//   await client.deleteImage("py");                       // cancels it while it builds
import type * as grpc from "@grpc/grpc-js";

import type { Client } from "./client.js";
import type { Image__Output } from "./generated/sandgate/v1/Image.js";
import type { ImageBuildProgress__Output } from "./generated/sandgate/v1/ImageBuildProgress.js";
import { Streamed } from "./streamed.js";

export type ImageRecord = Image__Output;

/**
 * A build that runs (Client.buildImage): iterate it for mmdebstrap's progress lines as they
 * come (a loop left early may be taken up again); `image` is the built image once the build
 * ended. cancel() ends the call, which cancels the build unless it was started with `detach`.
 */
export class ImageBuild extends Streamed<ImageBuildProgress__Output, string, ImageRecord> {
  constructor(
    readonly name: string,
    call: grpc.ClientReadableStream<ImageBuildProgress__Output>,
  ) {
    super(call, (p) => (p.image ? { last: p.image } : { item: p.line }), `image ${name}: the build's stream ended without the image`);
  }

  /** The built image (state STATE_READY), or the build's error. */
  get image(): Promise<ImageRecord> {
    return this.result;
  }

  /** Reads the rest of the progress and returns the built image. */
  async wait(): Promise<ImageRecord> {
    for await (const _ of this) {
      // drained: the build ended
    }
    return this.result;
  }
}

export function buildImage(client: Client, name: string, packages: string[], detach: boolean): ImageBuild {
  return new ImageBuild(name, client.images.BuildImage({ name, packages, detach }, client.metadata()));
}

export function getImage(client: Client, name: string): Promise<ImageRecord> {
  return client.unary<ImageRecord>("GetImage", { name }, client.images);
}

export async function listImages(client: Client): Promise<ImageRecord[]> {
  const res = await client.unary<{ images: ImageRecord[] }>("ListImages", {}, client.images);
  return res.images;
}

export function deleteImage(client: Client, name: string): Promise<ImageRecord> {
  return client.unary<ImageRecord>("DeleteImage", { name }, client.images);
}
