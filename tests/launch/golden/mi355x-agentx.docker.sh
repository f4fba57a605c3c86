# mi355x / low-latency / unified: Verified
#   (seed: Extend the cache hierarchy: the measured AgentX frontier is MXFP4, Low Latency, HiCache L1+L2 with --hicache-size 180)

# server: node 0, GPUs 0-3, port 30000
docker run \
  --rm \
  --name flashfleet-server \
  --network host \
  --ipc host \
  --shm-size 16g \
  --ulimit memlock=-1 \
  --ulimit stack=67108864 \
  --device /dev/kfd \
  --device /dev/dri \
  --group-add video \
  --security-opt seccomp=unconfined \
  --cap-add SYS_PTRACE \
  -v /opt/flashfleet/hf-cache:/root/.cache/huggingface \
  --env-file /etc/flashfleet/secrets.env \
  -e SGLANG_USE_AITER=1 \
  -e HIP_VISIBLE_DEVICES=0,1,2,3 \
  flashfleet/sglang:v0.5.23-rocm720-mi35x-tf5.19.0 \
  sglang serve \
  --model-path OneNexus/GLM-5.3-Flash-MXFP4 \
  --tp-size 4 \
  --dsa-prefill-backend tilelang \
  --dsa-decode-backend tilelang \
  --kv-cache-dtype fp8_e4m3 \
  --moe-runner-backend aiter \
  --enable-hierarchical-cache \
  --hicache-size 180 \
  --speculative-algorithm EAGLE \
  --speculative-num-steps 5 \
  --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 6 \
  --mm-feature-transport cpu \
  --reasoning-parser auto \
  --tool-call-parser auto \
  --host 0.0.0.0 \
  --port 30000

# note: --mamba-full-memory-ratio stays at SGLang's generic 0.9: boot once, then run `flashfleet size --boot-log LOG --avg-request-len L` to balance the KDA state and KV pools
# note: the HiCache host tier must fit in host memory, or the server does not start
# note: MI355X: the seed runs this as a Python launch on four GPUs in a ROCm environment; CUDA benchmark rows are not MI355X measurements
# note: needs a build with PR #36507 (GLM-5.3-Flash support; first in v0.5.20)
# note: needs a build with PR #42178 (MI355X HiCache host tier; first release not recorded)
# note: image and video input need a transformers with Glm5NextProcessor (5.17.0 or later, with tokenizers>=0.23.1; 5.12.1 answers images from the text alone), and torchcodec for video
# note: the --env-file holds HF_TOKEN=...; keep it root-only (chmod 600)
