go test fuzz v1
[]byte("module @jit_f.0 {\n  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<i32>) -> tensor<i32> {\n    %0 = stablehlo.constant dense<2> : tensor<i32>\n    %1 = stablehlo.multiply %0, %arg0 : tensor<i32>\n    %2 = stablehlo.add %1, %arg1 : tensor<i32>\n    return %2 : tensor<i32>\n  }\n}\n")
bool(false)
