# A moto server for `make up EMULATOR=moto` and CI: the offline, licence-free AWS emulator,
# built from the same OS base as the functions with wheels from the host.
ARG BASE_IMAGE=python:3.13-slim-trixie
FROM ${BASE_IMAGE}
COPY .build/wheelhouse-moto/ /wheels/
RUN python3 -m venv /opt/moto \
 && /opt/moto/bin/pip install -q --no-index --find-links /wheels -r /wheels/moto.txt \
 && /opt/moto/bin/pip uninstall -q -y pip \
 && rm -rf /wheels
ENV PATH=/opt/moto/bin:$PATH MOTO_PORT=4566
EXPOSE 4566
USER 10001
HEALTHCHECK --interval=2s --timeout=2s --retries=30 \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4566/moto-api/data.json', timeout=2)"]
CMD ["moto_server", "-H", "0.0.0.0", "-p", "4566"]
