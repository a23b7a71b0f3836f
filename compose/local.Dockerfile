# The local tools image for `make up`: the moto server (EMULATOR=moto), the provisioning init,
# the event wiring and the SMTP ingress, from the host packages (cli/, local/, ops/) and `common`. Built from the
# same OS base as the functions with wheels from the host; never deployed.
ARG BASE_IMAGE=python:3.13-slim-trixie
FROM ${BASE_IMAGE}
COPY .build/wheelhouse-local/ /wheels/
RUN python3 -m venv /opt/local \
 && /opt/local/bin/pip install -q --no-index --find-links /wheels -r /wheels/local.txt \
 && /opt/local/bin/pip uninstall -q -y pip \
 && rm -rf /wheels \
 && printf '#!/bin/sh\nexec python -m ops.main "$@"\n' > /usr/local/bin/email-handler \
 && chmod 755 /usr/local/bin/email-handler
COPY common/ /opt/lib/common/
COPY deploy/ /opt/lib/deploy/
COPY cli/ /opt/lib/cli/
COPY local/ /opt/lib/local/
COPY ops/ /opt/lib/ops/
ENV PATH=/opt/local/bin:$PATH PYTHONPATH=/opt/lib PYTHONUNBUFFERED=1 LANG=C.UTF-8
EXPOSE 4566 2525
USER 10001
WORKDIR /tmp
# 0.0.0.0 inside the container only: compose publishes the port on 127.0.0.1 (compose/emulator-moto.yml).
CMD ["python", "-m", "local.emulator", "-H", "0.0.0.0", "-p", "4566", "--allow-remote"]
