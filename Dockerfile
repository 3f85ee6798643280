# Hugging Face Docker Space (sdk: docker, app_port: 8501): the explorer on the bundled samples.
# Spaces run the container as user 1000; uploads work inside the Space's iframe (see --public).
FROM python:3.11-slim

RUN useradd --create-home --uid 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    PYTHONUNBUFFERED=1
WORKDIR /home/user/app

COPY --chown=user pyproject.toml README.md app.py ./
COPY --chown=user .streamlit ./.streamlit
COPY --chown=user graph ./graph
COPY --chown=user views ./views
COPY --chown=user sample_traces ./sample_traces
RUN pip install --no-cache-dir --user -e ".[app]"

EXPOSE 8501
CMD ["rollout-graph", "view", "--public", "--port", "8501"]
