#!/usr/bin/env python3
"""An outside client of the daemon's reflection and health services: Python's grpcio (Debian's
python3-grpcio) with the few protobuf messages it needs encoded by hand, from the protos'
field numbers alone. Prints what it learnt; exits non-zero on any RPC error.

    reflection_client.py unix:/path/to/socket
"""
import sys

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    """A length-delimited field (strings, bytes, messages)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fields(data):
    """(number, value) for each field of a message; varints as ints, the rest as bytes."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            size, i = read_varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield number, value


def read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def list_services(channel, version):
    call = channel.stream_stream(
        "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version)
    # ServerReflectionRequest.list_services = 7
    responses = list(call(iter([field(7, b"")]), timeout=10))
    names = []
    for number, value in fields(responses[0]):
        if number == 6:  # ServerReflectionResponse.list_services_response
            for n, service in fields(value):
                if n == 1:  # ListServiceResponse.service
                    names += [v.decode() for k, v in fields(service) if k == 1]
    return sorted(names)


def health(channel, service):
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    answer = check(field(1, service.encode()), timeout=10)  # HealthCheckRequest.service = 1
    status = dict(fields(answer)).get(1, 0)  # HealthCheckResponse.status = 1
    return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING"}.get(status, str(status))


def main():
    with grpc.insecure_channel(sys.argv[1]) as channel:
        for version in ("v1", "v1alpha"):
            print("%s services: %s" % (version, " ".join(list_services(channel, version))))
        for service in ("", "sandgate.v1.Sandgate"):
            print("health %s: %s" % (service or '""', health(channel, service)))


if __name__ == "__main__":
    main()
