# syntax=docker/dockerfile:1
# bucketd's container image. Named Dockerfile so that both `docker build .` and
# `podman build .` find it (a Containerfile symlink is not followed by every BuildKit).
# docs/operations.md, "Containers":
#
#   docker build -t bucketd .
#   docker run -d --name bucketd -p 8080:8080 -p 9000:9000 -v bucketd-data:/data \
#       -e BUCKETD_ACCESS_KEY_ID=admin -e BUCKETD_SECRET_ACCESS_KEY=change-me-please bucketd
#
# BASE: any image whose `python3` is Python 3.11 or newer with its venv module, and with
# useradd (the tests build on a Debian root file system they make, as no image registry is
# reachable there).
ARG BASE=python:3.11-slim

# What pip installs, read from pyproject.toml: the build backend and bucketd's dependencies.
# The stages below copy these lists, so that a change elsewhere in pyproject.toml (a tool's
# settings, the dev extra) rebuilds none of their layers, and a change to the code only
# bucketd's own.
FROM ${BASE} AS requirements
COPY pyproject.toml /
RUN python3 -c 'import tomllib; p = tomllib.load(open("/pyproject.toml", "rb")); \
open("/build.txt", "w").write("\n".join(p["build-system"]["requires"]) + "\n"); \
open("/run.txt", "w").write("\n".join(p["project"]["dependencies"]) + "\n")'

# The wheel, built from the sources alone; nothing of its build is in the final image.
FROM ${BASE} AS wheel
# pip's settings for the build only (no layer keeps them): a mirror with
# --build-arg PIP_INDEX_URL=https://pypi.example.internal/simple, or wheels in a folder
# mounted into the build with no network at all, as the tests do:
#   podman build -v "$PWD/wheels:/wheels:ro" --build-arg PIP_NO_INDEX=1 \
#       --build-arg PIP_FIND_LINKS=/wheels --network=none .
ARG PIP_INDEX_URL
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ARG PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=requirements /build.txt /build.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /build && /build/bin/pip install -r /build.txt
COPY pyproject.toml README.md LICENSE /src/
COPY gateway /src/gateway
COPY storage /src/storage
COPY bucketd_client /src/bucketd_client
COPY bucketd /src/bucketd
RUN /build/bin/pip wheel --no-build-isolation --no-deps --no-cache-dir --wheel-dir /dist /src

FROM ${BASE}
ARG PIP_INDEX_URL
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ARG PIP_DISABLE_PIP_VERSION_CHECK=1
ENV PATH=/opt/bucketd/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    BUCKETD_HOST=0.0.0.0 \
    BUCKETD_DATA_DIR=/data
# A user of its own (a number, so that Kubernetes' runAsNonRoot can check it) owns the data
# dir, which a new named volume copies, ownership included.
RUN useradd --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin bucketd \
    && mkdir /data && chown 10001:10001 /data && chmod 0700 /data \
    && python3 -m venv /opt/bucketd
# The dependencies, a layer of their own. The pip cache is a build cache, never a layer.
COPY --from=requirements /run.txt /tmp/requirements.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt
# bucketd itself. A copy of the wheel, not a mount of the stage: podman rebuilds a layer
# when what it copies changes. pip check: the layer above meets the wheel's requirements.
COPY --from=wheel /dist /tmp/dist
RUN pip install --no-deps --no-cache-dir /tmp/dist/*.whl && rm -r /tmp/dist && pip check

USER 10001:10001
VOLUME /data
EXPOSE 8080 9000
# /readyz answers 200 once the index and the storage answer (docs/operations.md); the image
# has Python, not curl. Another port or TLS set in a config file needs its own --health-cmd.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('BUCKETD_PORT', '8080'), timeout=4)"]
# Exec form: bucketd is PID 1 and gets the stop signal itself (SIGTERM: requests in flight
# finish, for up to ten seconds, so give `docker stop` a little longer: -t 15).
ENTRYPOINT ["bucketd"]
CMD ["serve"]
