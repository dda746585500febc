export const eventHandlers = {};
