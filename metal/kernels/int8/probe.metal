// The int8 probe: compiled (and its pipeline made) at warm-up before the
// int8 library, it uses exactly the descriptors, operand types and tile
// function of the real kernels (mpp.metal), so a compiler, SDK or GPU that
// cannot build them fails here with the compiler's message.
kernel void i8_probe(device float* out [[buffer(0)]], device const int8_t* q [[buffer(1)]],
                     device const float* rs [[buffer(2)]], device const int8_t* w [[buffer(3)]],
                     device const float* cs [[buffer(4)]], constant I8Params& p [[buffer(5)]],
                     uint2 tg [[threadgroup_position_in_grid]]) {
  I8Scaled o = {out, rs, cs, p.out_cols};
  if (p.rows > 32)
    i8_tile<64>(o, q, w, p, tg);
  else
    i8_tile<32>(o, q, w, p, tg);
}
