# gb300 / high-throughput / pd: Preview
#   (seed 3.6: PD mechanically validated with dummy weights only on 4x GB300)

# prefill: node 0, GPUs 0-1, port 31000
docker run \
  --rm \
  --name flashfleet-prefill \
  --network host \
  --ipc host \
  --shm-size 32g \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  --gpus '"device=0,1"' \
  -v /opt/flashfleet/hf-cache:/root/.cache/huggingface \
  --env-file /etc/flashfleet/secrets.env \
  -e UCX_NET_DEVICES=lo \
  -e UCX_TLS=tcp,cuda_copy,cuda_ipc,self,sm \
  flashfleet/sglang:v0.5.23-cu130-tf5.19.0 \
  sglang serve \
  --model-path zai-org/GLM-5.3-Flash \
  --tp-size 2 \
  --dsa-prefill-backend tilelang \
  --dsa-decode-backend tilelang \
  --kv-cache-dtype bfloat16 \
  --moe-runner-backend triton \
  --disaggregation-mode prefill \
  --disaggregation-bootstrap-port 8998 \
  --disaggregation-transfer-backend nixl \
  --nccl-port 31500 \
  --enable-metrics \
  --host 0.0.0.0 \
  --port 31000

# decode: node 0, GPUs 2-3, port 32000
docker run \
  --rm \
  --name flashfleet-decode \
  --network host \
  --ipc host \
  --shm-size 32g \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  --gpus '"device=2,3"' \
  -v /opt/flashfleet/hf-cache:/root/.cache/huggingface \
  --env-file /etc/flashfleet/secrets.env \
  -e UCX_NET_DEVICES=lo \
  -e UCX_TLS=tcp,cuda_copy,cuda_ipc,self,sm \
  flashfleet/sglang:v0.5.23-cu130-tf5.19.0 \
  sglang serve \
  --model-path zai-org/GLM-5.3-Flash \
  --tp-size 2 \
  --dsa-prefill-backend tilelang \
  --dsa-decode-backend tilelang \
  --kv-cache-dtype bfloat16 \
  --moe-runner-backend triton \
  --disaggregation-mode decode \
  --disaggregation-transfer-backend nixl \
  --nccl-port 32500 \
  --enable-metrics \
  --host 0.0.0.0 \
  --port 32000

# router: node 0, GPUs none, port 30000, after prefill, decode
docker run \
  --rm \
  --name flashfleet-router \
  --network host \
  --ipc host \
  --shm-size 32g \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  flashfleet/sglang:v0.5.23-cu130-tf5.19.0 \
  smg launch \
  --pd-disaggregation \
  --prefill http://127.0.0.1:31000 8998 \
  --decode http://127.0.0.1:32000 \
  --request-timeout-secs 600 \
  --health-check-interval-secs 10 \
  --health-failure-threshold 3 \
  --health-check-timeout-secs 30 \
  --no-remove-unhealthy-workers \
  --cb-timeout-duration-secs 10 \
  --retry-max-retries 5 \
  --host 0.0.0.0 \
  --port 30000

# note: --mamba-full-memory-ratio stays at SGLang's generic 0.9: boot once, then run `flashfleet size --boot-log LOG --avg-request-len L` to balance the KDA state and KV pools
# note: mm transport auto: CPU on a single CUDA node, CUDA VMM on multi-node GB200/GB300 (MNNVL)
# note: the router's positional 8998 after --prefill equals the prefill's --disaggregation-bootstrap-port; PD is a preview validated with dummy weights (triton MoE runner)
# note: needs a build with PR #36507 (GLM-5.3-Flash support; first in v0.5.20)
# note: image and video input need a transformers with Glm5NextProcessor (5.17.0 or later, with tokenizers>=0.23.1; 5.12.1 answers images from the text alone), and torchcodec for video
# note: the --env-file holds HF_TOKEN=...; keep it root-only (chmod 600)
