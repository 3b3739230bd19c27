# The one image for the operator and for replica drivers/executors (Spark on Kubernetes).
# Build: docker build -t dataflow-operator:dev .
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 185 --create-home --home-dir /opt/dataflow spark
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# Hadoop's s3a connector, so that `stateUri: s3a://…` and s3a sources work in the image:
# hadoop-aws of exactly the Hadoop version pyspark bundles (its hadoop-client-api jar),
# and the AWS SDK v2 bundle that this Hadoop release was built against (its POM's
# aws-java-sdk-v2.version), both from Maven Central.
RUN jars="$(python -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')" \
 && HADOOP_VERSION="$(ls "$jars" | sed -n 's/^hadoop-client-api-\(.*\)\.jar$/\1/p')" \
 && test -n "$HADOOP_VERSION" \
 && base=https://repo1.maven.org/maven2 \
 && AWS_SDK_VERSION="$(curl -fsSL "$base/org/apache/hadoop/hadoop-project/${HADOOP_VERSION}/hadoop-project-${HADOOP_VERSION}.pom" \
      | sed -n 's:.*<aws-java-sdk-v2.version>\(.*\)</aws-java-sdk-v2.version>.*:\1:p' | head -n 1)" \
 && test -n "$AWS_SDK_VERSION" \
 && echo "s3a: hadoop-aws ${HADOOP_VERSION}, AWS SDK bundle ${AWS_SDK_VERSION}" \
 && curl -fsSL -o "$jars/hadoop-aws-${HADOOP_VERSION}.jar" \
      "$base/org/apache/hadoop/hadoop-aws/${HADOOP_VERSION}/hadoop-aws-${HADOOP_VERSION}.jar" \
 && curl -fsSL -o "$jars/bundle-${AWS_SDK_VERSION}.jar" \
      "$base/software/amazon/awssdk/bundle/${AWS_SDK_VERSION}/bundle-${AWS_SDK_VERSION}.jar"
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYSPARK_PYTHON=python \
    DATAFLOW_LOG_FORMAT=json \
    DATAFLOW_STATE_DIR=/opt/dataflow/state
USER 185
WORKDIR /opt/dataflow
# Spark's classes archived at build time, as the user and in the folder drivers run as
# and in (an archive holds its class path: the shadow Spark home this user's cache holds):
# every driver JVM maps it instead of loading them (docs/cli.md, `class-archive`).
ENV DATAFLOW_CLASS_ARCHIVE=/opt/dataflow/spark-classes.jsa
RUN DATAFLOW_LOG_LEVEL=WARNING dataflow-operator class-archive
# Every role runs through this entry point: the operator (CMD below), replica drivers
# (their pod's command: `dataflow-operator replica`) and executors, which Spark creates
# with no command and `args: [executor]`: `dataflow-operator executor` execs the
# executor JVM as Spark's own image entry point does (dataflow_operator/executor_command.py).
ENTRYPOINT ["/usr/bin/tini", "--", "dataflow-operator"]
CMD ["operator", "--all-namespaces"]
