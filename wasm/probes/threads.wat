(module (import "m" "m" (memory 1 1 shared)) (func (result i32) i32.const 0 i32.const 0 memory.atomic.notify))
