-- a task whose __tostring fails, named in the error message
local task = setmetatable({}, {__tostring = function() error("no text") end})
return {defaults = {}, build = function() end, task = task}
