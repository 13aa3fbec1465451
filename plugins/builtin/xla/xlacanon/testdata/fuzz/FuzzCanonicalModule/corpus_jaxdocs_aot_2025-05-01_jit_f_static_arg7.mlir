go test fuzz v1
[]byte("module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n  func.func public @main(%arg0: tensor<i32>) -> (tensor<i32> {jax.result_info = \"result\"}) {\n    %c = stablehlo.constant dense<14> : tensor<i32>\n    %0 = stablehlo.add %c, %arg0 : tensor<i32>\n    return %0 : tensor<i32>\n  }\n}\n")
bool(false)
