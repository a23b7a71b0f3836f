# LocalStack community 4.4.0 for `make up` on machines that cannot pull localstack/localstack:4.4.0:
# the same runtime (the PyPI package localstack-core, the version of the image tag) on the project's
# OS image, installed from the host wheelhouse (scripts/wheelhouse.sh localstack) against the hash
# lock requirements/localstack.txt; built by scripts/localstack-image.sh with --network none and
# the wheelhouse as the build context.
ARG BASE_IMAGE=python:3.13-slim-trixie

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY . /wheels/
# Four dependencies publish only sdists: setuptools (from the lock) goes in first and builds them
# in place, since build isolation would need an index. The lock is the whole closure (less what
# scripts/lock-localstack.py leaves out), hence --no-deps.
RUN python3 -m venv /opt/localstack \
 && /opt/localstack/bin/pip install -q --find-links /wheels --require-hashes -r /wheels/build.lock \
 && /opt/localstack/bin/pip install -q --find-links /wheels --require-hashes --no-build-isolation --no-deps -r /wheels/localstack.lock \
 && /opt/localstack/bin/pip uninstall -q -y pip

FROM ${BASE_IMAGE}
# LocalStack's container layout: state and caches under /var/lib/localstack and /tmp/localstack,
# init hooks under /etc/localstack/init (compose mounts start.d); /_localstack/health reads
# /usr/lib/localstack (static libraries, none here) and fails when it is missing.
RUN useradd --uid 10001 --no-create-home --no-user-group --gid 0 --home-dir /tmp --shell /usr/sbin/nologin localstack \
 && mkdir -p /var/lib/localstack /tmp/localstack /usr/lib/localstack /etc/localstack/init/boot.d /etc/localstack/init/start.d \
             /etc/localstack/init/ready.d /etc/localstack/init/shutdown.d \
 && chown 10001:0 /var/lib/localstack /tmp/localstack
COPY --from=build /opt/localstack /opt/localstack
ENV PATH=/opt/localstack/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GATEWAY_LISTEN=0.0.0.0:4566 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
EXPOSE 4566
USER 10001
WORKDIR /tmp
CMD ["python", "-m", "localstack.runtime.main"]
