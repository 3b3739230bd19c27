-- Argo CD health of a dataflow.dev Replica (status written by dataflow-operator).
-- Healthy: Ready is True for the current generation. Degraded: Degraded is True, or
-- the replica is neither Ready nor Progressing (it gave up): the failing condition's
-- reason and message. Progressing otherwise: not yet observed, this generation not yet
-- reconciled, or a driver starting, restarting or handing over.
local hs = {status = "Progressing", message = "Waiting for the operator to observe the Replica"}

local function condition(conditions, kind)
  for _, c in ipairs(conditions or {}) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.message = "Generation " .. tostring(generation) .. " not yet observed"
  return hs
end
local ready = condition(obj.status.conditions, "Ready")
local progressing = condition(obj.status.conditions, "Progressing")
local degraded = condition(obj.status.conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded)
elseif ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
elseif progressing ~= nil and progressing.status == "True" then
  hs.message = describe(progressing)
elseif ready ~= nil and progressing ~= nil then
  hs.status = "Degraded"
  hs.message = describe(ready)
elseif ready ~= nil then
  hs.message = describe(ready)
end
return hs
