# The image the Deployment in deploy/ runs: the package on a slim Python base, as a non-root user.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install . && rm -rf /src
USER 65532:65532
ENTRYPOINT ["kopf-scheduler"]
CMD ["run"]
