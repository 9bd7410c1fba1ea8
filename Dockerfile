# The operator image: `foresize operator` (collector, recommender, disruption worker,
# admission webhooks, /metrics). Build from a checkout:
#   docker build -t REGISTRY/foresize:0.1.0 .
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home foresize
USER 65532
EXPOSE 8443 8080
ENTRYPOINT ["foresize"]
CMD ["operator"]
