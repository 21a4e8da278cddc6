-- a field read that fails
return setmetatable({defaults = {}}, {__index = function(t, k) error("no field " .. k) end})
