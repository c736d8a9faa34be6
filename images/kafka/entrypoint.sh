#!/usr/bin/env bash
# Starts a single-node Kafka in KRaft combined mode (broker + controller),
# or, with KAFKA_CFG_PROCESS_ROLES and KAFKA_CFG_NODE_ID set, one side of the
# harness's split topology (a controller, node 1, on the image's storage; a
# broker, node 2, with KAFKA_CFG_LOG_DIRS of its own, formatted at its first
# start).
#
# Every environment variable KAFKA_CFG_SOME_KEY becomes the broker property
# some.key (so KAFKA_CFG_ADVERTISED_LISTENERS sets advertised.listeners). The
# harness uses this to declare one listener per client link, each advertised
# as the Toxiproxy address in front of it. The storage directory is formatted
# when the image is built (`entrypoint.sh --format-only`, with the same fixed
# cluster id), so a container starts the broker at once; a container restart
# keeps its data.
#
# Fast-start settings (the broker serves one test run): single-partition
# offsets and transaction-state topics (the latter is created at the first
# init_transactions of a fenced writer, profile hardened; 50 partitions by
# default), no initial rebalance delay, and a JVM that stops at the C1
# compiler (about 1.4 s less to a running broker on 2 cores, measured).
# Transactions on one broker need the transaction-state topic's replication
# factor and min ISR at 1.
set -euo pipefail
conf=/opt/kafka/config/server.properties
data=/var/lib/kafka/data
cluster_id=${KAFKA_CLUSTER_ID:-cdcchaoscluster0000001}

declare -A props=(
  [process.roles]=broker,controller
  [node.id]=1
  [controller.quorum.voters]=1@127.0.0.1:9093
  [controller.listener.names]=CONTROLLER
  [listeners]=CONTROLLER://:9093,INTERNAL://:9092
  [advertised.listeners]=INTERNAL://127.0.0.1:9092
  [inter.broker.listener.name]=INTERNAL
  [listener.security.protocol.map]=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT
  [log.dirs]=$data
  [num.partitions]=3
  [auto.create.topics.enable]=true
  [offsets.topic.replication.factor]=1
  [offsets.topic.num.partitions]=1
  [transaction.state.log.replication.factor]=1
  [transaction.state.log.min.isr]=1
  [transaction.state.log.num.partitions]=1
  [group.initial.rebalance.delay.ms]=0
  [share.coordinator.state.topic.replication.factor]=1
  [share.coordinator.state.topic.min.isr]=1
)
while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_CFG_*)
      key=${name#KAFKA_CFG_}
      key=${key,,}
      props[${key//_/.}]=$value
      ;;
  esac
done < <(env)

# The storage is where log.dirs says (a broker of the split topology has
# its own, formatted at its first start: the image's is the controller's).
data=${props[log.dirs]}

: > "$conf"
for k in "${!props[@]}"; do printf '%s=%s\n' "$k" "${props[$k]}" >> "$conf"; done
echo "cdc-chaos kafka ${KAFKA_VERSION}: effective configuration:"
sort "$conf" | sed 's/^/  /'

java_cmd=(java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -XX:TieredStopAtLevel=1
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties
  -cp '/opt/kafka/lib/*')
if [ ! -f "$data/meta.properties" ]; then
  echo "formatting $data with cluster id $cluster_id"
  "${java_cmd[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$conf" --ignore-formatted
fi
[ "${1:-}" = --format-only ] && exit 0
exec "${java_cmd[@]}" kafka.Kafka "$conf"
