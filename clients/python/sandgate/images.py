"""Sandbox images (docs/images.md): root file systems built from Debian packages, which a
session or a run names in its sandbox (`image=`).

    build = client.build_image("py", ["python3", "python3-pandas"])
    for line in build:                             # mmdebstrap's output, line by line
        print(line)
    print(build.image.state, build.image.size_bytes)   # sandgate.pb.Image, READY
    with client.session(image="py") as s:
        print(s.run("python3 -c 'import pandas'").exit_code)
    for image in client.list_images():
        print(image.name, image.digest)
    client.delete_image("py")                      # cancels it while it builds

A name that is not the caller's to use is NotFound or PermissionDenied as the policy says;
building needs policy.build_images (or an operator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence

import grpc

from .errors import Error, from_rpc_error
from .v1 import images_pb2 as ipb

if TYPE_CHECKING:
    from .client import Client


class ImageBuild:
    """A build that runs (Client.build_image). Iterate it for mmdebstrap's progress lines as
    they come (a loop left early may be taken up again: leaving it does not cancel the build);
    once the build ended, `image` is the built image (sandgate.images_pb.Image, READY). wait()
    reads the rest and returns it. cancel() ends the call, which cancels the build unless it
    was started with detach.

    One thread reads an ImageBuild.
    """

    def __init__(self, name: str, call) -> None:
        self.name = name
        self._call = call
        self._failure: Optional[Error] = None
        self.image: Optional[ipb.Image] = None

    def __iter__(self) -> Iterator[str]:
        if self._failure is not None:
            raise self._failure
        try:
            for progress in self._call:  # the call's own iterator: it goes on where it was
                if progress.HasField("image"):
                    self.image = progress.image
                else:
                    yield progress.line
        except grpc.RpcError as e:
            self._failure = from_rpc_error(e)
            raise self._failure from None
        if self.image is None:
            self._failure = Error(grpc.StatusCode.UNKNOWN,
                                  f"image {self.name}: the build's stream ended without the image")
            raise self._failure

    def wait(self) -> ipb.Image:
        for _ in self:
            pass
        assert self.image is not None
        return self.image

    def cancel(self) -> None:
        self._call.cancel()


def build(client: "Client", name: str, packages: Sequence[str], detach: bool,
          timeout: Optional[float]) -> ImageBuild:
    request = ipb.BuildImageRequest(name=name, packages=list(packages), detach=detach)
    return ImageBuild(name, client.stream("BuildImage", request, service=client.images,
                                          timeout=timeout))


def get(client: "Client", name: str) -> ipb.Image:
    return client.call("GetImage", ipb.GetImageRequest(name=name), service=client.images)


def list_(client: "Client") -> List[ipb.Image]:
    return list(client.call("ListImages", ipb.ListImagesRequest(),
                            service=client.images).images)


def delete(client: "Client", name: str) -> ipb.Image:
    return client.call("DeleteImage", ipb.DeleteImageRequest(name=name), service=client.images)
