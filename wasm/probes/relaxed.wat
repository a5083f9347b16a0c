(module
  (func (export "dot") (result i32)
    v128.const i8x16 1 -2 3 -4 5 6 7 8 -128 127 0 1 2 3 4 5
    v128.const i8x16 5 6 7 8 127 127 127 127 1 2 3 4 0 0 0 0
    v128.const i32x4 1000 0 0 0
    i32x4.dot_i8x16_i7x16_add_s
    i32x4.extract_lane 0
    v128.const i8x16 -128 127 5 -3 0 0 0 0 0 0 0 0 0 0 0 0
    v128.const i8x16 127 127 2 0 0 0 0 0 0 0 0 0 0 0 0 0
    i16x8.dot_i8x16_i7x16_s
    i16x8.extract_lane_s 0
    i32.add)
  (func (result v128) v128.const f32x4 0 0 0 0 v128.const f32x4 0 0 0 0 v128.const f32x4 0 0 0 0 f32x4.relaxed_madd))
