# gb300 / low-latency / unified: Verified
#   (seed: CUDA benchmark rows; GB300 KV/DSA pairing measured (2.9-5.7% throughput, 1.8x KV tokens))

# server: node 0, GPUs 0-3, port 30000
docker run \
  --rm \
  --name flashfleet-server \
  --network host \
  --ipc host \
  --shm-size 32g \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  --gpus '"device=0,1,2,3"' \
  -v /opt/flashfleet/hf-cache:/root/.cache/huggingface \
  --env-file /etc/flashfleet/secrets.env \
  flashfleet/sglang:v0.5.23-cu130-tf5.19.0 \
  sglang serve \
  --model-path zai-org/GLM-5.3-Flash \
  --tp-size 4 \
  --dsa-prefill-backend trtllm \
  --dsa-decode-backend trtllm \
  --kv-cache-dtype fp8_e4m3 \
  --moe-runner-backend flashinfer_trtllm \
  --speculative-algorithm EAGLE \
  --speculative-num-steps 5 \
  --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 6 \
  --reasoning-parser auto \
  --tool-call-parser auto \
  --host 0.0.0.0 \
  --port 30000

# note: --mamba-full-memory-ratio stays at SGLang's generic 0.9: boot once, then run `flashfleet size --boot-log LOG --avg-request-len L` to balance the KDA state and KV pools
# note: mm transport auto: CPU on a single CUDA node, CUDA VMM on multi-node GB200/GB300 (MNNVL)
# note: needs a build with PR #36507 (GLM-5.3-Flash support; first in v0.5.20)
# note: image and video input need a transformers with Glm5NextProcessor (5.17.0 or later, with tokenizers>=0.23.1; 5.12.1 answers images from the text alone), and torchcodec for video
# note: the --env-file holds HF_TOKEN=...; keep it root-only (chmod 600)
