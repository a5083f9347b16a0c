(module (func (result v128) v128.const i32x4 0 0 0 0))
