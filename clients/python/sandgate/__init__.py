"""sandgate: the Python client of sandgated (README "Python").

    import sandgate

    with sandgate.Client() as client:       # $SANDGATE_ADDR / $SANDGATE_TOKEN, like the CLI
        run = client.run_analysis("statements.csv")
        for event in run.events():
            print(event.seq, event.type)
        run.download("out")
        with client.session() as s:
            code, out, err = s.run("uname -a")

`sandgate.pb` is the generated sandgate.v1 message module (Run, Event, SandboxSpec, …), made
from proto/sandgate/v1/sandgate.proto when the project is built; `sandgate.images_pb` the
one of proto/sandgate/v1/images.proto (Image).
"""

from .client import Client
from .errors import (AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                     FailedPrecondition, InvalidArgument, NotFound, PermissionDenied,
                     ResourceExhausted, Unauthenticated, Unavailable, Unimplemented)
from .images import ImageBuild
from .processes import Process, ProcessResult
from .runs import Run, RunStatus
from .sessions import Execution, ExecResult, FileList, Output, Session
from .v1 import images_pb2 as images_pb
from .v1 import sandgate_pb2 as pb

__all__ = [
    "AlreadyExists", "Cancelled", "Client", "DataLoss", "DeadlineExceeded", "Error",
    "ExecResult", "Execution", "FailedPrecondition", "FileList", "ImageBuild", "InvalidArgument",
    "NotFound",
    "Output", "PermissionDenied", "Process", "ProcessResult", "ResourceExhausted", "Run",
    "RunStatus", "Session",
    "Unauthenticated", "Unavailable", "Unimplemented", "images_pb", "pb",
]
