# The operator image: `foresize operator` (collector, recommender, disruption worker,
# admission webhooks, /metrics). No image is published: build it from a checkout and push
# it where the cluster can pull it, then name it at install (docs/install.md §2):
#   docker build -t REGISTRY/foresize:0.1.0 . && docker push REGISTRY/foresize:0.1.0
#   foresize manifests all --image REGISTRY/foresize:0.1.0 | kubectl apply -f -
#   helm install foresize deploy/helm/foresize --set image.repository=REGISTRY/foresize
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home foresize
USER 65532
EXPOSE 8443 8080
ENTRYPOINT ["foresize"]
CMD ["operator"]
